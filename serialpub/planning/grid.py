"""The candidate settings of a plan: a grid from the command line or a YAML file.

Every setting is the configuration's (serialpub/config.py): ``l`` (ℓ), ``k_prime``,
``strategy``, ``alpha``, ``protected_values`` (``all``, a list of values, or
``rarest:m``: the m values with the fewest records in the planned snapshots),
``partition_model`` and ``after_k_prime``. The grid is the cartesian product of the values
given per setting; a setting not given takes the workspace's value. k' belongs to the
constant-ratio strategy and α to the geometric one, so a candidate carries only its own
strategy's parameter and duplicates are dropped.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from anonymizer.settings import AfterKPrime, PartitionModel, Strategy
from serialpub.config import Config
from serialpub.errors import InputError

#: the grid's settings and the spelling of each on the command line
SETTINGS = {
    "l": "--l",
    "k_prime": "--k",
    "strategy": "--strategy",
    "alpha": "--alpha",
    "protected_values": "--protected",
    "partition_model": "--partition-model",
    "after_k_prime": "--after-k",
}
RAREST = "rarest:"


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
    """

    ell: float
    strategy: str
    k_prime: int | None
    alpha: float | None
    protected: str | tuple[str, ...]
    partition_model: str
    after_k_prime: str

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
        return f"ℓ={self.ell:g} {self.strategy} {param} {self.protected_label} {self.partition_model}"

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
        }


def _number(setting: str, text: Any, kind: type) -> Any:
    try:
        value = kind(text)
    except (TypeError, ValueError):
        raise InputError(f"setting {SETTINGS[setting]}: {text!r} is not a number") from None
    if kind is float and not math.isfinite(value):
        raise InputError(f"setting {SETTINGS[setting]}: {text!r} is not a finite number")
    return value


def _checked(setting: str, value: Any, domain: Sequence[str]) -> Any:
    """One value of a setting, checked against its allowed range."""
    flag = SETTINGS[setting]
    if setting == "l":
        ell = _number(setting, value, float)
        if not ell > 1:
            raise InputError(f"setting {flag}: ℓ = {value} is impossible; ℓ must be greater than 1 (the bound is 1/ℓ)")
        if ell < 2:
            raise InputError(f"setting {flag}: ℓ = {value}; serialpub allows ℓ >= 2 (serialpub.yaml's 'l')")
        return ell
    if setting == "k_prime":
        k = _number(setting, value, float)
        if not k >= 1 or k != int(k):
            raise InputError(f"setting {flag}: k' = {value} is impossible; k' must be a whole number >= 1")
        return int(k)
    if setting == "alpha":
        alpha = _number(setting, value, float)
        if not alpha > 1:
            raise InputError(f"setting {flag}: α = {value} is impossible; α must be greater than 1")
        return alpha
    choices = {"strategy": Strategy, "partition_model": PartitionModel, "after_k_prime": AfterKPrime}
    if setting in choices:
        allowed = [m.value for m in choices[setting]]
        if str(value) not in allowed:
            raise InputError(f"setting {flag}: {value!r} is not one of {', '.join(allowed)}")
        return str(value)
    # protected values
    if isinstance(value, str) and value == "all":
        return "all"
    if isinstance(value, str) and value.startswith(RAREST):
        m = value[len(RAREST) :]
        if not m.isdigit() or not 1 <= int(m) <= len(domain):
            raise InputError(
                f"setting {flag}: {value!r}; rarest:m needs a whole m from 1 to {len(domain)} (the domain's size)"
            )
        return f"{RAREST}{int(m)}"
    values = [value] if isinstance(value, str) else list(value) if isinstance(value, list | tuple) else None
    if values is None or not values:
        raise InputError(f"setting {flag}: {value!r}; use all, rarest:m, or a list of values of the domain")
    unknown = [str(v) for v in values if str(v) not in domain]
    if unknown:
        shown = ", ".join(domain[:20]) + (", ..." if len(domain) > 20 else "")
        raise InputError(f"setting {flag}: {', '.join(map(repr, unknown))} not in the sensitive domain ({shown})")
    return tuple(dict.fromkeys(str(v) for v in values))


def read_grid_file(path: Path) -> dict[str, list[Any]]:
    """A grid file: a YAML mapping of settings (those of :data:`SETTINGS`) to a value or a list.

    Raises:
        InputError: missing, not YAML, not a mapping, or an unknown setting.
    """
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: grid file not found") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise InputError(f"{path}: a grid file is a mapping of settings ({', '.join(SETTINGS)}) to lists of values")
    aliases = {"ell": "l", "protected": "protected_values", "k": "k_prime"}
    grid: dict[str, list[Any]] = {}
    for key, value in raw.items():
        name = aliases.get(str(key), str(key))
        if name not in SETTINGS:
            raise InputError(f"{path}: unknown setting {key!r}; a grid sets {', '.join(SETTINGS)}")
        values = value if isinstance(value, list) else [value]
        if (
            name == "protected_values"
            and isinstance(value, list)
            and value
            and all(isinstance(v, str) and v != "all" and not v.startswith(RAREST) for v in value)
        ):
            values = [value]  # one list of values, not a list of candidates
        if not values:
            raise InputError(f"{path}: setting {key!r} lists no value; the grid would be empty")
        grid[name] = values
    return grid


def build_grid(given: Mapping[str, Sequence[Any]], config: Config, domain: Sequence[str]) -> list[Candidate]:
    """The candidates: the cartesian product of ``given`` (setting -> values), the
    workspace's ``config`` for a setting not given.

    Raises:
        InputError: a setting given with no value (an empty grid), or a value out of its
            range (ℓ <= 1, α <= 1, k' < 1, a protected value outside ``domain``).
    """
    for name, values in given.items():
        if not list(values):
            raise InputError(f"setting {SETTINGS[name]}: no value given; the grid is empty (give at least one)")
    default: dict[str, list[Any]] = {
        "l": [config.ell],
        "k_prime": [config.k_prime if config.k_prime is not None else 20],
        "strategy": [config.strategy.value],
        "alpha": [config.alpha if config.alpha is not None else 2.0],
        "protected_values": [config.protected_values],
        "partition_model": [config.effective_partition_model.value],
        "after_k_prime": [config.after_k_prime.value],
    }
    axes = {name: [_checked(name, v, domain) for v in given.get(name, default[name])] for name in SETTINGS}
    out: dict[Candidate, None] = {}
    for combo in itertools.product(*axes.values()):
        s = dict(zip(axes, combo, strict=True))
        constant = s["strategy"] == "constant"
        out.setdefault(
            Candidate(
                ell=s["l"], strategy=s["strategy"], k_prime=s["k_prime"] if constant else None,
                alpha=None if constant else s["alpha"], protected=s["protected_values"],
                partition_model=s["partition_model"], after_k_prime=s["after_k_prime"] if constant else "renew",
            ),
            None,
        )  # fmt: skip
    if not out:
        raise InputError("the grid is empty; give at least one value per setting")
    return list(out)
