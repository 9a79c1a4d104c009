"""The *diagnosis* scenario: the Adult register with a **synthetic** diagnosis attribute.

Nothing here is real medical data. The register and quasi-identifiers are the bundled
UCI Adult rows (:mod:`serialpub.datasets.adult`, 45,222 individuals, the ARX QIs); the
sensitive attribute ``diagnosis`` is drawn at random, independently of the QIs, from a
seeded generator, so the same seed always gives the same table, byte for byte.

Why it exists: paper 004 (Wong et al., section 8) runs its experiments on a hospital
database (CADRMP) whose sensitive attribute has about 2,300 values, and protects only its
*rarest* ones: "We take 10% least frequent sensitive values as transient sensitive
values" (232 values). The Adult occupation (14 values, all protected in the demo) is a
very different regime. This module rebuilds the paper's regime on Adult:

* **Codes.** ``chapters × blocks × codes`` ICD-like codes (default 20 × 10 × 10 = 2,000):
  code ``C05.3`` lies in block ``C05`` of chapter ``C00-C09``. The hierarchy file follows
  the ARX CSV convention, one row per code: ``C05.3;C05;C00-C09;*``.
* **Frequencies.** Heavy-tailed (Zipf): the code of popularity rank r (1 = most common)
  has probability ∝ r^(-``exponent``) (default exponent 1.0, so the 200 most common codes
  take about 72 % of the mass); ranks are assigned to codes by a seeded permutation, so
  rarity is unrelated to the hierarchy. Every code is given to at least one individual
  (the first ``n_codes`` rows of a seeded permutation of the register get one code each,
  the others draw from the Zipf law), so every code occurs in the base table.
* **Protected values.** The ``PROTECTED_FRACTION`` (10 %) least frequent codes of the base
  table, counted over its rows, ties broken by code label: paper 004's choice of
  transient sensitive values. The other 90 % are published unprotected.

:func:`create_workspace` writes a ready workspace (register, hierarchies, ``serialpub.yaml``
listing the protected codes, snapshots from :mod:`serialpub.simulate` with the paper's
preset), like ``serialpub demo`` does for Adult.
"""

from __future__ import annotations

import shutil
import string
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from serialpub.config import CONFIG_NAME, Config, Workspace, config_of, load_config
from serialpub.config_render import render_config
from serialpub.datasets import adult
from serialpub.io.generated import replace_generated_folder
from serialpub.series_files import write_series
from serialpub.simulate import PRESETS, SeriesSpec

SENSITIVE = "diagnosis"
QUASI_IDENTIFIERS = adult.QUASI_IDENTIFIERS
ID_COLUMN = adult.ID_COLUMN
CHAPTERS = 20
BLOCKS_PER_CHAPTER = 10
CODES_PER_BLOCK = 10
ZIPF_EXPONENT = 1.0
#: share of the codes, least frequent first, that are protected (paper 004, section 8)
PROTECTED_FRACTION = 0.10
#: marker of a folder made by :func:`create_workspace` (it may be replaced)
MARKER = ".serialpub-diagnosis"
SOURCE = "UCI Adult register (45,222 rows) with a SYNTHETIC Zipf-distributed diagnosis (serialpub.datasets.diagnosis)"


@dataclass(frozen=True)
class DiagnosisData:
    """A generated base table and its code system.

    Attributes:
        table: one row per individual: ``id``, the Adult QIs (strings) and ``diagnosis``.
        hierarchy: code, block, chapter of every code, in code order, shape (n_codes, 3).
        probability: Zipf probability of every code (same order), shape (n_codes,), sums to 1.
        counts: rows of ``table`` per code (same order), shape (n_codes,), every count >= 1.
        protected: the protected codes, least frequent first (ties: code label).
    """

    table: pd.DataFrame
    hierarchy: pd.DataFrame
    probability: npt.NDArray[np.float64]
    counts: npt.NDArray[np.int64]
    protected: list[str]


def code_hierarchy(
    chapters: int = CHAPTERS, blocks: int = BLOCKS_PER_CHAPTER, codes: int = CODES_PER_BLOCK
) -> pd.DataFrame:
    """The code system: columns ``code``, ``block``, ``chapter``, one row per code.

    Chapter c (0-based) has letter ``string.ascii_uppercase[c]``; its blocks are
    ``<letter>00`` .. and its codes ``<block>.<digit>``; the chapter label is the block range
    (``C00-C09``). At most 26 chapters, 100 blocks per chapter and 10 codes per block.
    """
    if not (1 <= chapters <= 26 and 1 <= blocks <= 100 and 1 <= codes <= 10):
        raise ValueError("need 1-26 chapters, 1-100 blocks per chapter and 1-10 codes per block")
    letter = np.repeat(np.array(list(string.ascii_uppercase[:chapters]), dtype=object), blocks * codes)
    b = np.tile(np.repeat(np.arange(blocks), codes), chapters)
    d = np.tile(np.arange(codes), chapters * blocks)
    block = letter + pd.Series(b).map("{:02d}".format).to_numpy(dtype=object)
    code = block + "." + d.astype(str).astype(object)
    chapter = np.asarray([f"{x}00-{x}{blocks - 1:02d}" for x in string.ascii_uppercase[:chapters]], dtype=object)
    chapter = np.repeat(chapter, blocks * codes)
    return pd.DataFrame({"code": code, "block": block, "chapter": chapter})


def protected_codes(codes: npt.ArrayLike, counts: npt.ArrayLike, fraction: float = PROTECTED_FRACTION) -> list[str]:
    """The ``round(fraction · len(codes))`` least frequent codes, rarest first, ties by label.

    Args:
        codes: code labels, shape (m,).
        counts: occurrences of each code, shape (m,).
        fraction: share of the codes to protect, in (0, 1].
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    labels = np.asarray(codes, dtype=str)
    order = np.lexsort((labels, np.asarray(counts)))
    return labels[order[: max(1, round(fraction * labels.size))]].tolist()


def generate(
    seed: int = 0,
    base: pd.DataFrame | None = None,
    rows: int | None = None,
    chapters: int = CHAPTERS,
    blocks: int = BLOCKS_PER_CHAPTER,
    codes: int = CODES_PER_BLOCK,
    exponent: float = ZIPF_EXPONENT,
    fraction: float = PROTECTED_FRACTION,
) -> DiagnosisData:
    """The base table of the scenario: Adult individuals with a synthetic diagnosis.

    Args:
        seed: seed of ``numpy.random.default_rng`` (ranks, the row sample, the draws).
        base: the Adult table (:func:`serialpub.datasets.adult.load_adult`, read if None).
        rows: keep only this many individuals, a seeded sample in id order (for small
            test workspaces); None keeps all 45,222.
        chapters, blocks, codes: the code system (:func:`code_hierarchy`).
        exponent: Zipf exponent s > 0 of the code frequencies.
        fraction: share of the codes protected, least frequent first.

    Returns:
        :class:`DiagnosisData`.

    Raises:
        ValueError: fewer rows than codes (every code must occur), or a bad parameter.
    """
    if not exponent > 0:
        raise ValueError(f"the Zipf exponent must be > 0, got {exponent}")
    rng = np.random.default_rng(seed)
    table = adult.load_adult() if base is None else base
    if rows is not None:
        if not 1 <= rows <= len(table):
            raise ValueError(f"rows must be in [1, {len(table)}], got {rows}")
        table = table.iloc[np.sort(rng.choice(len(table), size=rows, replace=False))]
    table = table[[ID_COLUMN, *QUASI_IDENTIFIERS]].reset_index(drop=True)
    hierarchy = code_hierarchy(chapters, blocks, codes)
    m, n = len(hierarchy), len(table)
    if n < m:
        raise ValueError(f"{n} rows cannot hold each of the {m} codes once; use fewer codes or more rows")
    rank = rng.permutation(m)  # rank[i]: popularity rank (0 = most common) of code i
    weight = (rank + 1.0) ** -exponent
    probability = np.asarray(weight / weight.sum(), dtype=np.float64)
    value = np.empty(n, dtype=np.int64)
    order = rng.permutation(n)
    value[order[:m]] = np.arange(m)  # every code once
    value[order[m:]] = rng.choice(m, size=n - m, p=probability)
    labels = hierarchy["code"].to_numpy(dtype=str)
    table[SENSITIVE] = labels[value]
    counts = np.bincount(value, minlength=m).astype(np.int64)
    return DiagnosisData(table, hierarchy, probability, counts, protected_codes(labels, counts, fraction))


def hierarchy_lines(hierarchy: pd.DataFrame) -> list[str]:
    """ARX CSV rows ``code;block;chapter;*`` of a :func:`code_hierarchy` table."""
    return (hierarchy["code"] + ";" + hierarchy["block"] + ";" + hierarchy["chapter"] + ";*").tolist()


def create_workspace(
    out: Path,
    *,
    ell: float = 2,
    strategy: str = "constant",
    k_prime: int = 20,
    alpha: float = 2.0,
    guarantee: str = "global",
    dilution: str = "register",
    budget: float = 0.0,
    rounds: int = 20,
    seed: int = 0,
    rows: int | None = None,
    auto_approve: bool = False,
    base: pd.DataFrame | None = None,
    chapters: int = CHAPTERS,
    blocks: int = BLOCKS_PER_CHAPTER,
) -> Workspace:
    """Write a workspace of the diagnosis scenario and return it loaded.

    Files: ``register.csv`` (id + Adult QIs), ``snapshots/snapshot-0001.csv``.. (the paper
    preset of :mod:`serialpub.simulate`: equal partitions, 20 % carried over, 20 % of
    diagnoses redrawn from the base distribution), ``series.json``, ``hierarchies/`` (the
    Adult QI hierarchies and ``diagnosis.csv``), ``serialpub.yaml`` (:func:`config`,
    the protected codes listed, written by :func:`serialpub.config_render.render_config`) and
    ``protected-values.txt`` (the same codes, one a line, with their base-table counts).

    Args:
        out: the folder; a folder made earlier by this function (it holds the
            :data:`MARKER` file) is replaced, any other non-empty folder is refused.
        ell, strategy, k_prime, alpha, guarantee, dilution, budget: written to the
            configuration (docs/configuration.md).
        rounds: number of snapshots.
        seed: seed of the diagnosis draw (:func:`generate`) and of the series.
        rows: a seeded sample of this many Adult individuals instead of all (small tests).
        auto_approve: ``sign_off.auto_approve`` (test and demo environments only).
        base: the Adult table if already loaded.
        chapters, blocks: a smaller code system (``chapters × blocks × 10`` codes) for
            quick tests; the scenario is the default 20 × 10 × 10 = 2,000.

    Raises:
        InputError: ``out`` is a non-empty folder not made by this function.
    """
    replace_generated_folder(
        out,
        MARKER,
        "made by serialpub.datasets.diagnosis.create_workspace; the next run replaces it",
        "a diagnosis workspace; choose an empty or new folder",
    )
    data = generate(seed=seed, base=base, rows=rows, chapters=chapters, blocks=blocks)
    spec = SeriesSpec(
        rounds=rounds, carry_over=PRESETS["paper"]["carry_over"], redraw=PRESETS["paper"]["redraw"], seed=seed
    )
    write_series(out, data.table, ID_COLUMN, QUASI_IDENTIFIERS, SENSITIVE, spec, SOURCE)
    hdir = out / "hierarchies"
    hdir.mkdir()
    for col in QUASI_IDENTIFIERS:
        shutil.copyfile(adult.hierarchy_dir() / f"{col}.csv", hdir / f"{col}.csv")
    (hdir / f"{SENSITIVE}.csv").write_text("\n".join(hierarchy_lines(data.hierarchy)) + "\n", encoding="utf-8")
    count_of = dict(zip(data.hierarchy["code"], data.counts.tolist(), strict=True))
    (out / "protected-values.txt").write_text(
        "".join(f"{c}\t{count_of[c]}\n" for c in data.protected), encoding="utf-8"
    )
    settings = config(
        data.protected,
        ell=ell,
        strategy=strategy,
        k_prime=k_prime,
        alpha=alpha,
        guarantee=guarantee,
        dilution=dilution,
        budget=budget,
        auto_approve=auto_approve,
    )
    (out / CONFIG_NAME).write_text(
        render_config(
            settings,
            {
                "protected_values": f"SYNTHETIC diagnoses: the {len(data.protected)} least frequent codes of the "
                "base table, paper 004's transient sensitive values; their counts are in protected-values.txt.",
                **({"sign_off.auto_approve": "A test environment."} if auto_approve else {}),
            },
        ),
        encoding="utf-8",
    )
    return load_config(out / CONFIG_NAME)


def config(
    protected: Sequence[str],
    *,
    ell: float = 2,
    strategy: str = "constant",
    k_prime: int = 20,
    alpha: float = 2.0,
    guarantee: str = "global",
    dilution: str = "register",
    budget: float = 0.0,
    auto_approve: bool = False,
) -> Config:
    """The scenario's configuration: the Adult QIs (age numeric), ``diagnosis`` sensitive
    with ``protected`` listed; a positive ``budget`` runs the bottom-up search (the only
    one that suppresses), and bounds the suppression rate too.

    Raises:
        InputError: a setting is invalid (one line naming it).
    """
    algorithm = "bottomup" if budget > 0 else "topdown"
    return config_of(
        {
            "dataset": "diagnosis",
            "quasi_identifiers": QUASI_IDENTIFIERS,
            "sensitive": SENSITIVE,
            "numeric": adult.NUMERIC,
            "protected_values": list(protected),
            "l": ell,
            "strategy": strategy,
            "k_prime": k_prime,
            "alpha": alpha,
            "guarantee": guarantee,
            "dilution": dilution,
            "algorithm": algorithm,
            "partition_model": "parts" if algorithm == "bottomup" else "published",
            "suppression_budget": budget,
            "validation": {"max_suppression_rate": budget},
            "sign_off": {"auto_approve": auto_approve},
        },
        "the diagnosis scenario",
    )


def snapshots(ws: Workspace) -> list[Path]:
    """The workspace's snapshot files in period order."""
    return sorted((ws.root / "snapshots").glob("snapshot-*.csv"))
