"""``serialpub demo``: a workspace on the bundled Adult data, and its 20 releases."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from serialpub import known_breach
from serialpub.config import CONFIG_NAME, Config, Workspace, config_of, load_config
from serialpub.config_render import render_config
from serialpub.datasets import adult
from serialpub.evolving import Evolution
from serialpub.io import signing
from serialpub.io.generated import replace_generated_folder
from serialpub.io.hierarchies import read_hierarchy
from serialpub.series_files import PERIOD_REGISTERS, write_series
from serialpub.simulate import PRESETS, SeriesSpec

MARKER = ".serialpub-demo"
#: k' of the demo's constant-ratio strategy for its 20 rounds (paper 004, section 8)
DEMO_K_PRIME = 20


def default_k_prime(rounds: int) -> int:
    """The demo's k' when none is given: 20, or the number of rounds when fewer. No
    individual is linked by more releases than the series has, so k' = ``rounds`` covers
    every release; a larger k' only raises the constant ratio ñ_c (paper 004, section 6.1:
    29.4 at ℓ = 2 and k' = 20, 3.4 at k' = 2), and a short series' snapshots each hold a
    large share of the register (half of it at 2 rounds), whose protected values then
    exceed 1/ñ_c of the register already in the first release: no generalization meets it
    (docs/commands.md, ``serialpub demo``)."""
    return min(DEMO_K_PRIME, rounds)


def k_prime_note(rounds: int) -> str:
    """The comment on ``k_prime`` in the ``serialpub.yaml`` of a demo of fewer rounds than
    :data:`DEMO_K_PRIME`, whose k' :func:`default_k_prime` set to ``rounds``: that file is
    the one a publisher copies, and this k' was chosen for the demo's length only."""
    left_out = Config.model_fields["k_prime"].default
    return (
        f"serialpub demo set k' to its number of rounds, {rounds}, instead of {DEMO_K_PRIME} (the demo's default; "
        f"{left_out} when k_prime is left out), so that its first release has room; choose k' for the length of "
        "your own series (serialpub strategy, serialpub plan)."
    )


#: the demo publisher's Ed25519 private key, relative to the workspace (public: .pub beside it)
DEMO_KEY = "keys/publisher.key"


def create_workspace(
    out: Path,
    *,
    ell: float = 2,
    strategy: str = "constant",
    k_prime: int | None = None,
    after_k_prime: str = "renew",
    alpha: float = 2.0,
    guarantee: str = "global",
    dilution: str = "register",
    budget: float | None = None,
    suppression_model: str = "mechanism",
    algorithm: str | None = None,
    partition_model: str | None = None,
    split_rule: str = "widest",
    propensity_ratio: int | dict[str, int] = 1,
    protected: Sequence[str] | None = None,
    rounds: int = 20,
    seed: int = 0,
    evolving_register: bool = False,
) -> Workspace:
    """Write a demo workspace: register, hierarchies, configuration and snapshots.

    A folder made by an earlier demo (it holds the marker file) is replaced; any other
    non-empty folder is refused, so the demo never deletes a user's files.

    ``budget`` None means 0 under the mechanism-aware model (suppression buys no privacy
    there) and 5 % under the paper's model; ``algorithm`` None means the top-down search,
    or the bottom-up one under the paper's model (the only one that suppresses);
    ``protected`` None protects every occupation; ``k_prime`` None is
    :func:`default_k_prime` of ``rounds``. ``evolving_register``: the register
    changes every period (:mod:`serialpub.evolving`: two periods a year, ages advance, 1 %
    leave and 1 % join a year, 1 % a year change marital status or work class); each
    period's register is in ``register-periods/`` and :func:`register_of` names it.
    ``serialpub.yaml`` is written by :func:`serialpub.config_render.render_config`.

    Raises:
        InputError: a setting is invalid (one line naming it), or ``out`` is a non-empty
            folder not made by the demo.
    """
    notes = {
        "sign_off.auto_approve": "The demo is a test environment.",
        "signing_key": "The demo's key, made with the workspace (keys/publisher.pub beside it).",
        "validation.max_suppression_rate": "The demo's suppression_budget.",
    }
    if k_prime is None and default_k_prime(rounds) != DEMO_K_PRIME:
        notes["k_prime"] = k_prime_note(rounds)
    k_prime = default_k_prime(rounds) if k_prime is None else k_prime
    algorithm = algorithm or ("topdown" if suppression_model == "mechanism" else "bottomup")  # paper: suppresses
    budget = (0.0 if suppression_model == "mechanism" else 0.05) if budget is None else budget
    # validated before any file is written, so that a bad option leaves no workspace behind
    config = config_of(
        {
            "dataset": "adult",
            "quasi_identifiers": adult.QUASI_IDENTIFIERS,
            "sensitive": adult.SENSITIVE,
            "numeric": adult.NUMERIC,
            "protected_values": "all" if protected is None else list(protected),
            "l": ell,
            "strategy": strategy,
            "k_prime": k_prime,
            "after_k_prime": after_k_prime,
            "alpha": alpha,
            "guarantee": guarantee,
            "dilution": dilution,
            "suppression_model": suppression_model,
            "algorithm": algorithm,
            "partition_model": partition_model or ("parts" if algorithm == "bottomup" else "published"),
            # choosing a breachable model on the command line is its acknowledgement: the
            # file says so, and every release of the demo then states the risk
            "split_rule": split_rule,
            "propensity_ratio": propensity_ratio,
            "accept_known_breach": known_breach.taken(suppression_model, algorithm, partition_model),
            "suppression_budget": budget,
            "validation": {"max_suppression_rate": budget},
            "sign_off": {"auto_approve": True},
            "signing_key": DEMO_KEY,
        },
        "serialpub demo",
    )
    replace_generated_folder(
        out,
        MARKER,
        "made by 'serialpub demo'; the next demo run replaces this folder",
        "a serialpub demo workspace; choose an empty or new --out",
    )
    spec = SeriesSpec(
        rounds=rounds, carry_over=PRESETS["paper"]["carry_over"], redraw=PRESETS["paper"]["redraw"], seed=seed
    )
    write_series(
        out,
        adult.load_adult(),
        adult.ID_COLUMN,
        adult.QUASI_IDENTIFIERS,
        adult.SENSITIVE,
        spec,
        "bundled UCI Adult (cleaned, 45,222 rows)",
        _adult_evolution() if evolving_register else None,
    )
    (out / "hierarchies").mkdir()
    for col in [*adult.QUASI_IDENTIFIERS, adult.SENSITIVE]:
        shutil.copyfile(adult.hierarchy_dir() / f"{col}.csv", out / "hierarchies" / f"{col}.csv")
    signing.create_key_pair(out / DEMO_KEY)  # keys/publisher.pub is what a data user audits with
    (out / CONFIG_NAME).write_text(render_config(config, notes), encoding="utf-8")
    return load_config(out / CONFIG_NAME)


def snapshots(ws: Workspace) -> list[Path]:
    return sorted((ws.root / "snapshots").glob("snapshot-*.csv"))


def register_of(ws: Workspace, snapshot: Path) -> Path | None:
    """The register of a snapshot's period in an evolving demo (None when it is fixed)."""
    path = ws.root / PERIOD_REGISTERS / snapshot.name.replace("snapshot-", "register-")
    return path if path.is_file() else None


def _adult_evolution() -> Evolution:
    """Adult's evolving register: ages within its hierarchy's leaves (17-90), moves as a
    change of marital status or work class (Adult has no residence)."""
    ages = [int(a) for a in read_hierarchy(adult.hierarchy_dir() / "age.csv", "age").leaves]
    return Evolution(
        age_column="age", min_age=min(ages), max_age=max(ages), move_columns=["marital-status", "workclass"]
    )
