"""The candidate settings of a plan: a grid from the command line or a YAML file.

Every setting is the configuration's (serialpub/config.py): ``l`` (ℓ), ``k_prime``,
``strategy``, ``alpha``, ``protected_values`` (``all``, a list of values, or
``rarest:m``: the m values with the fewest records in the planned snapshots),
``partition_model``, ``after_k_prime``, ``partition_epsilon``, ``split_rule`` and
``propensity_ratio``. The grid is the cartesian product of the values given per setting; a
setting not given takes the workspace's value. k' belongs to the constant-ratio strategy and α to the geometric
one, so a candidate carries only its own strategy's parameter and duplicates are dropped.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anonymizer.settings import (
    MAX_EPSILON,
    AfterKPrime,
    Dilution,
    PartitionModel,
    PartitionTest,
    SplitRule,
    Strategy,
)
from serialpub.config import Config
from serialpub.errors import InputError, quoted
from serialpub.io.release_settings import PLAN_OPTIONS, PLAN_TAKES
from serialpub.io.settings_yaml import read_yaml

#: the grid's settings (their ``serialpub.yaml`` keys) and the spelling of each on the
#: command line, and what each takes (for the message refusing a boolean): declared with
#: the setting (:mod:`serialpub.io.release_settings`)
SETTINGS = PLAN_OPTIONS
_TAKES = PLAN_TAKES
RAREST = "rarest:"
#: the most candidates a plan runs unless ``max_candidates`` allows more (docs/commands.md,
#: ``serialpub plan``): each publishes every round in memory, so a grid a typo multiplied
#: would run for days before saying anything
MAX_CANDIDATES = 200
#: the largest grid file read: a grid of :data:`MAX_CANDIDATES` candidates is a few lines
MAX_GRID_BYTES = 256 << 10


@dataclass(frozen=True)
class Candidate:
    """One candidate setting of a series.

    Attributes:
        ell: ℓ, > 1 (the breach bound is 1/ℓ).
        strategy: ``constant`` or ``geometric``.
        k_prime: k' (constant ratio), None for the geometric strategy.
        alpha: α (geometric), None for the constant ratio.
        protected: ``"all"``, ``"rarest:m"``, or the protected values in order.
        partition_model: ``published`` or ``parts`` (the latter leaks: docs/threat-model.md).
        after_k_prime: ``renew`` or ``stop`` (constant ratio only).
        partition_epsilon: ε of ``partition_test: noisy`` (docs/anonymization.md), None for
            the sound test.
        propensity_ratio: ρ of the charge (docs/threat-model.md, "The propensity ratio"), or
            (value, ρ) pairs: one ρ per listed protected value, the others 1.
        split_rule: the top-down search's choice among admissible splits, ``widest`` or
            ``history`` (docs/anonymization.md, "Where the cuts fall").
    """

    ell: float
    strategy: str
    k_prime: int | None
    alpha: float | None
    protected: str | tuple[str, ...]
    partition_model: str
    after_k_prime: str
    partition_epsilon: float | None = None
    propensity_ratio: int | tuple[tuple[str, int], ...] = 1
    split_rule: str = SplitRule.WIDEST.value

    @property
    def known_breach(self) -> bool:
        """The partition reads each part's own counts: a model with a known breach
        (docs/threat-model.md, the ``parts`` model's residual risk)."""
        return self.partition_model == PartitionModel.PARTS.value

    @property
    def protected_label(self) -> str:
        if isinstance(self.protected, str):
            return self.protected
        return "|".join(self.protected)

    @property
    def label(self) -> str:
        """A short name: ``ℓ=2 constant k'=20 renew all published``."""
        param = f"k'={self.k_prime} {self.after_k_prime}" if self.strategy == "constant" else f"α={self.alpha:g}"
        noisy = "" if self.partition_epsilon is None else f" noisy ε={self.partition_epsilon:g}"
        rho = "" if self.propensity_ratio == 1 else f" ρ={ratio_text(self.propensity_ratio)}"
        cuts = "" if self.split_rule == SplitRule.WIDEST.value else f" cuts={self.split_rule}"
        return f"ℓ={self.ell:g} {self.strategy} {param} {self.protected_label} {self.partition_model}{noisy}{rho}{cuts}"

    def record(self) -> dict[str, Any]:
        """The settings as the configuration spells them (JSON)."""
        return {
            "l": self.ell,
            "strategy": self.strategy,
            "k_prime": self.k_prime,
            "alpha": self.alpha,
            "protected_values": self.protected if isinstance(self.protected, str) else list(self.protected),
            "partition_model": self.partition_model,
            "after_k_prime": self.after_k_prime,
            # only for the noisy test: a sound candidate's record keeps its keys
            **(
                {"partition_test": "noisy", "partition_epsilon": self.partition_epsilon}
                if self.partition_epsilon is not None
                else {}
            ),
            # only above 1: a uniform candidate's record keeps its keys
            **(
                {}
                if self.propensity_ratio == 1
                else {"propensity_ratio": dict(self.propensity_ratio)}
                if isinstance(self.propensity_ratio, tuple)
                else {"propensity_ratio": self.propensity_ratio}
            ),
            # only under history: a widest candidate's record keeps its keys
            **({"split_rule": self.split_rule} if self.split_rule != SplitRule.WIDEST.value else {}),
        }


def ratio_text(rho: int | tuple[tuple[str, int], ...]) -> str:
    """ρ as the plan's option spells it: ``3``, or ``value=ρ`` items joined by ``/``."""
    return str(rho) if isinstance(rho, int) else "/".join(f"{v}={r}" for v, r in rho)


def _ratio(flag: str, value: Any) -> int | tuple[tuple[str, int], ...]:
    """One ρ of the grid: a whole number, or one per value (the configuration's mapping, or
    ``value=ρ`` items joined by ``/`` on the command line)."""
    if isinstance(value, str) and "=" in value:
        value = dict(item.rsplit("=", 1) for item in value.split("/") if "=" in item)
    if isinstance(value, dict):
        try:
            pairs = tuple(sorted((str(v), int(r)) for v, r in value.items()))
        except ValueError:
            pairs = ()
        if not pairs or any(not 1 <= r <= 1000 for _, r in pairs):
            raise InputError(f"setting {flag}: give value=ρ items joined by /, each ρ a whole number from 1 to 1000")
        return pairs
    rho = _number("propensity_ratio", value, float)
    if not 1 <= rho <= 1000 or rho != int(rho):
        raise InputError(f"setting {flag}: ρ = {_shown(rho)}; ρ must be a whole number from 1 to 1000")
    return int(rho)


def _number(setting: str, text: Any, kind: type) -> Any:
    try:
        value = kind(text)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"setting {SETTINGS[setting]}: {quoted(text)} is not a number") from None
    if kind is float and not math.isfinite(value):
        raise InputError(f"setting {SETTINGS[setting]}: {quoted(text)} is not a finite number")
    return value


def _shown(number: float) -> str:
    """A number read from a grid as a message shows it: its shortest exact spelling, a
    whole number without '.0' (a short text, whatever was written)."""
    return str(int(number)) if number.is_integer() and abs(number) < 1e15 else repr(number)


def _checked(setting: str, value: Any, domain: Sequence[str]) -> Any:
    """One value of a setting, checked against its allowed range. A message shows the
    number read (bounded) or a :func:`quoted` value, never the whole of what was given."""
    flag = SETTINGS[setting]
    items = value if isinstance(value, list | tuple) else [value]
    boolean = next((v for v in items if isinstance(v, bool)), None)
    if boolean is not None:  # Python counts True as 1: k' = true would run as k' = 1
        raise InputError(f"setting {flag}: {str(boolean).lower()} is a boolean; write {_TAKES[setting]}")
    if setting == "l":
        ell = _number(setting, value, float)
        if not ell > 1:
            raise InputError(
                f"setting {flag}: ℓ = {_shown(ell)} is impossible; ℓ must be greater than 1 (the bound is 1/ℓ)"
            )
        if ell < 2:
            raise InputError(f"setting {flag}: ℓ = {_shown(ell)}; serialpub allows ℓ >= 2 (serialpub.yaml's 'l')")
        return ell
    if setting == "k_prime":
        k = _number(setting, value, float)
        if not k >= 1 or k != int(k):
            raise InputError(f"setting {flag}: k' = {_shown(k)} is impossible; k' must be a whole number >= 1")
        return int(k)
    if setting == "alpha":
        alpha = _number(setting, value, float)
        if not alpha > 1:
            raise InputError(f"setting {flag}: α = {_shown(alpha)} is impossible; α must be greater than 1")
        return alpha
    if setting == "propensity_ratio":
        return _ratio(flag, value)
    if setting == "partition_epsilon":
        if value == "sound":
            return None
        eps = _number(setting, value, float)
        if not 0 < eps <= MAX_EPSILON:
            raise InputError(f"setting {flag}: ε = {_shown(eps)}; give sound, or ε in (0, {MAX_EPSILON:.4f}] (ln 2)")
        return eps
    choices = {
        "strategy": Strategy,
        "partition_model": PartitionModel,
        "after_k_prime": AfterKPrime,
        "split_rule": SplitRule,
    }
    if setting in choices:
        allowed = [m.value for m in choices[setting]]
        if not isinstance(value, str) or value not in allowed:
            raise InputError(f"setting {flag}: {quoted(value)} is not one of {', '.join(allowed)}")
        return value
    return _protected(flag, value, domain)


def _protected(flag: str, value: Any, domain: Sequence[str]) -> str | tuple[str, ...]:
    """One value of the protected values: ``all``, ``rarest:m``, or values of ``domain``."""
    if isinstance(value, str) and value == "all":
        return "all"
    if isinstance(value, str) and value.startswith(RAREST):
        m = value[len(RAREST) :]
        # ASCII digits, and few of them: int() refuses '²' (a digit to str.isdigit) and 5,000 digits
        if not re.fullmatch(r"[0-9]{1,9}", m) or not 1 <= int(m) <= len(domain):
            raise InputError(
                f"setting {flag}: {quoted(value)}; rarest:m needs a whole m from 1 to {len(domain)} (the domain's size)"
            )
        return f"{RAREST}{int(m)}"
    values = [value] if isinstance(value, str) else list(value) if isinstance(value, list | tuple) else None
    if values is None or not values or not all(isinstance(v, str | int | float) for v in values):
        raise InputError(f"setting {flag}: {quoted(value)}; use all, rarest:m, or a list of values of the domain")
    unknown = [str(v) for v in values if str(v) not in domain]
    if unknown:
        more = f" and {len(unknown) - 1} more" if len(unknown) > 1 else ""
        shown = quoted(", ".join(domain[:20]) + (", ..." if len(domain) > 20 else ""))
        raise InputError(
            f"setting {flag}: {quoted(unknown[0])}{more} not in the sensitive domain of {len(domain)} values ({shown})"
        )
    return tuple(dict.fromkeys(str(v) for v in values))


def read_grid_file(path: Path) -> dict[str, list[Any]]:
    """A grid file: a YAML mapping of settings (those of :data:`SETTINGS`) to a value or a
    list, read as ``serialpub.yaml`` is (:func:`serialpub.io.settings_yaml.read_yaml`: at
    most :data:`MAX_GRID_BYTES`, no aliases, no tags, only ``true`` and ``false`` booleans).

    Raises:
        InputError: missing, too large, not YAML (or an alias or tag), not a mapping, or an
            unknown setting; one line naming the file.
    """
    raw = read_yaml(
        path,
        what="grid file",
        max_bytes=MAX_GRID_BYTES,
        if_missing="write one mapping settings to lists of values (docs/commands.md, serialpub plan)",
    )
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise InputError(f"{path}: a grid file is a mapping of settings ({', '.join(SETTINGS)}) to lists of values")
    aliases = {"ell": "l", "protected": "protected_values", "k": "k_prime"}
    grid: dict[str, list[Any]] = {}
    for key, value in raw.items():
        name = aliases.get(str(key), str(key))
        if name not in SETTINGS:
            raise InputError(f"{path}: unknown setting {quoted(key)}; a grid sets {', '.join(SETTINGS)}")
        values = value if isinstance(value, list) else [value]
        if (
            name == "protected_values"
            and isinstance(value, list)
            and value
            and all(isinstance(v, str) and v != "all" and not v.startswith(RAREST) for v in value)
        ):
            values = [value]  # one list of values, not a list of candidates
        if not values:
            raise InputError(f"{path}: setting {quoted(key)} lists no value; the grid would be empty")
        grid[name] = values
    return grid


def build_grid(
    given: Mapping[str, Sequence[Any]], config: Config, domain: Sequence[str], max_candidates: int = MAX_CANDIDATES
) -> list[Candidate]:
    """The candidates: the cartesian product of ``given`` (setting -> values), the
    workspace's ``config`` for a setting not given.

    Args:
        max_candidates: the most candidates built; a larger grid is refused before any is.

    Raises:
        InputError: a setting given with no value (an empty grid), a value out of its
            range (ℓ <= 1, α <= 1, k' < 1, a boolean, a protected value outside ``domain``),
            or more than ``max_candidates`` candidates.
    """
    for name, values in given.items():
        if not list(values):
            raise InputError(f"setting {SETTINGS[name]}: no value given; the grid is empty (give at least one)")
    # the workspace's own value of each setting, as its file spells it; the other strategy's
    # parameter, when the file leaves it out, at the default the demo and the docs use
    spelled = config.model_dump(mode="json", by_alias=True)
    default: dict[str, list[Any]] = {name: [spelled[name]] for name in SETTINGS}
    default["partition_model"] = [config.effective_partition_model.value]
    default["k_prime"] = [config.k_prime if config.k_prime is not None else 20]
    default["alpha"] = [config.alpha if config.alpha is not None else 2.0]
    noisy = config.partition_test is PartitionTest.NOISY
    default["partition_epsilon"] = [config.partition_epsilon if noisy else "sound"]
    axes = {
        name: list(dict.fromkeys(_checked(name, v, domain) for v in given.get(name, default[name])))
        for name in SETTINGS
    }
    if config.dilution is not Dilution.REGISTER and any(e is not None for e in axes["partition_epsilon"]):
        raise InputError(f"setting {SETTINGS['partition_epsilon']}: the noisy split test needs dilution: register")
    if config.dilution is not Dilution.REGISTER and SplitRule.HISTORY.value in axes["split_rule"]:
        raise InputError(
            f"setting {SETTINGS['split_rule']}: history needs dilution: register (under presence the statistics "
            "file it reads depends on who was present)"
        )
    size = _size(axes)
    if size > max_candidates:
        raise InputError(
            f"the grid has {size:,} candidates, more than the {max_candidates} a plan runs unless asked (each "
            f"publishes every round in memory); give fewer values, or --max-candidates {size} to run them all"
        )
    out: dict[Candidate, None] = {}
    for values in itertools.product(*axes.values()):
        s = dict(zip(axes, values, strict=True))
        constant = s["strategy"] == "constant"
        out.setdefault(
            Candidate(
                ell=s["l"],
                strategy=s["strategy"],
                k_prime=s["k_prime"] if constant else None,
                alpha=None if constant else s["alpha"],
                protected=s["protected_values"],
                partition_model=s["partition_model"],
                after_k_prime=s["after_k_prime"] if constant else "renew",
                # the noisy test runs under the published model only: a parts candidate is sound
                partition_epsilon=s["partition_epsilon"] if s["partition_model"] == "published" else None,
                propensity_ratio=s["propensity_ratio"],
                split_rule=s["split_rule"],
            ),
            None,
        )
    if not out:
        raise InputError("the grid is empty; give at least one value per setting")
    return list(out)


def _size(axes: Mapping[str, Sequence[Any]]) -> int:
    """The number of candidates of distinct axis values, counted without building them: k'
    and after_k_prime multiply the constant-ratio candidates only, α the geometric ones."""
    common = len(axes["l"]) * len(axes["protected_values"]) * len(axes["partition_model"])
    common *= len(axes.get("partition_epsilon", [None])) * len(axes.get("propensity_ratio", [1]))
    common *= len(axes.get("split_rule", [SplitRule.WIDEST.value]))
    constant = len(axes["k_prime"]) * len(axes["after_k_prime"]) if "constant" in axes["strategy"] else 0
    geometric = len(axes["alpha"]) if "geometric" in axes["strategy"] else 0
    return common * (constant + geometric)
