"""The manifest keys the audit reads (docs/release-contract.md) and the checksums it
compares them with (computed here with the standard library, not with the publisher's
release-file module).

The manifest is parsed by the release contract's one model
(:class:`serialpub.io.manifest.Manifest`, strict: the audit refuses what every other reader
refuses); the audit then works on its own small view of the keys it needs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from anonymizer.settings import Dilution, Guarantee
from serialpub.analysis.audit.spellings import value_codes
from serialpub.io.manifest import Manifest

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class ParsedManifest:
    release: int
    dataset: str
    quasi_identifiers: list[str]
    sensitive: str
    ell: float
    protected: list[str]
    dilution: Dilution
    sha256: dict[str, Any]
    previous: int | None
    records: int
    groups: int
    guarantee: Guarantee
    period: str
    suppressed: int | None
    suppression_model: str | None
    numeric: list[str]
    register_marginals: dict[str, dict[str, int]] | None
    # the models with a known breach it was made under (Manifest.known_breach)
    known_breach: list[str]
    # the max p over the series so far that the publisher states (max_breach_probability)
    stated_max_p: float | None
    # partition_test: noisy and its ε (None under the sound test: the key is absent)
    partition_test: str | None = None
    partition_epsilon: float | None = None
    # ρ of the charge (1 when the key is absent: the uniform charge), or ρ per protected
    # value (a value it does not list: 1)
    propensity_ratio: int | dict[str, int] = 1


def parse_manifest(manifest: dict[str, Any], where: str) -> ParsedManifest:
    """The keys the audit reads, after the release contract's strict parsing
    (:class:`serialpub.io.manifest.Manifest`).

    Raises:
        InputError: ``where``: the first key that breaks the contract and why.
    """
    m = Manifest.parse(manifest, where)
    return ParsedManifest(
        release=m.release,
        dataset=m.dataset,
        quasi_identifiers=list(m.quasi_identifiers),
        sensitive=m.sensitive,
        ell=m.l,
        protected=list(m.protected_values),
        dilution=Dilution(m.dilution),
        sha256=m.sha256.model_dump(by_alias=True),
        previous=m.previous_release,
        records=m.records,
        groups=m.groups,
        guarantee=Guarantee(m.guarantee),
        period=m.period,
        suppressed=m.suppressed,
        suppression_model=str(m.suppression_model) if m.suppression_model is not None else None,
        numeric=list(m.numeric_quasi_identifiers),
        register_marginals=m.register_marginals,
        known_breach=[str(b) for b in m.known_breach()],
        stated_max_p=m.max_breach_probability,
        partition_test=None if m.partition_test is None else str(m.partition_test),
        partition_epsilon=m.partition_epsilon,
        propensity_ratio=m.propensity_ratio or 1,
    )


def ratio_vector(propensity_ratio: int | dict[str, int], values: Sequence[str]) -> IntArray:
    """ρ_s per value of ``values`` (V,) from a manifest's ``propensity_ratio``: a number for
    every value, or a mapping (another spelling of a protected value is that value; a value
    it does not list is charged with 1)."""
    if not isinstance(propensity_ratio, dict):
        return np.full(len(values), propensity_ratio, dtype=np.int64)
    rho = np.ones(len(values), dtype=np.int64)
    codes = value_codes(list(values), list(propensity_ratio))
    given = np.array(list(propensity_ratio.values()), dtype=np.int64)
    rho[codes[codes >= 0]] = given[codes >= 0]
    return rho


def data_problems(m: ParsedManifest, columns: Sequence[object], records: int) -> tuple[list[str], bool]:
    """What a release's ``data.parquet`` breaks of its manifest (docs/release-contract.md),
    each a phrase whose subject is the file: a quasi-identifier or the sensitive column
    missing, a column the manifest does not name, a record count other than the manifest's.

    Args:
        m: the release's manifest.
        columns: the file's column names.
        records: its number of rows.

    Returns:
        the problems (empty: the shape is the manifest's) and whether the release can be
        read at all (False when a column it names is missing; the other problems are then
        not looked for).
    """
    absent = [c for c in [*m.quasi_identifiers, m.sensitive] if c not in columns]
    if absent:
        return [f"lacks column(s) {', '.join(absent)} named in the manifest"], False
    problems = []
    extra = [str(c) for c in columns if c not in m.quasi_identifiers and c != m.sensitive]
    if extra:
        problems.append(
            f"has column(s) {', '.join(extra)} that the manifest does not name; a release holds only the "
            "quasi-identifiers and the sensitive column (no identifier)"
        )
    if m.records is not None and m.records != records:
        problems.append(f"has {records} records, the manifest says {m.records}")
    return problems, True


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes, as the manifest records them."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def marginal_findings(register: Any, releases: list[ParsedManifest]) -> list[str]:
    """Releases whose ``register_marginals`` are not the register's individuals per leaf of
    each QI (a data user spreading generalized values by them would be misled), one line each.

    Args:
        register: the register as a DataFrame of strings, one column per QI.
        releases: the parsed manifests; those without marginals (older or imported) are skipped.
    """
    out: list[str] = []
    counts: dict[str, dict[str, int]] = {}
    for m in releases:
        if m.register_marginals is None:
            continue
        for q in m.quasi_identifiers:
            if q not in counts:
                counts[q] = {str(k): int(v) for k, v in register[q].value_counts().items() if v}
            given = {k: v for k, v in m.register_marginals.get(q, {}).items() if v}
            if given != counts[q]:
                wrong = sorted(set(given.items()) ^ set(counts[q].items()))[:3]
                out.append(
                    f"release {m.release}: register_marginals of '{q}' differ from the register's individuals per "
                    f"leaf (e.g. {', '.join(f'{k}={v}' for k, v in wrong)})"
                )
    return out
