"""Experiment: does "public splits, charged refusals" close the partition's evidence?
(docs/threat-model.md, "Residual risk: the partition as evidence").

This is a measurement of a proposal and not serialpub's search. On tiny series like those
of ``benchmarks/residual_risk.py`` (an age hierarchy a,b | c,d and sex m | f, three to
eight register individuals, one release), two top-down searches are run on *every* world,
and the adversary's exact posterior is compared with each search's own charge:

- ``try-all``: the shape of today's search. A region is split along the first QI (age,
  then sex) whose every part meets its ratio n ≥ T·n_s; otherwise it is final. Charge:
  n_s/n.
- ``charged``: the proposal. Each region has exactly one split, fixed by public
  information (age while age can be split, then sex). A part is *ok* when it meets its
  ratio and either its own split is ok or it is acceptable as a final group under the
  inflated charge n_s / (n · L). L is the largest hypergeometric tail, over its split's
  parts c and protected values s, P(n_{c,s} ≥ the smallest violating count) given the
  region's counts; it is a lower bound on the probability of the refusal the adversary
  sees. The release is refused when the root is not ok. Charge: n_s / (n · L) in a final
  group that was refused a split, n_s/n in an unsplittable one.

Posteriors are counted world by world in exact fractions (``tests/mechanism_oracle.py``'s
world space and uniform prior). Usage::

    .venv/bin/python benchmarks/charged_refusals.py --series 300 --seed 0
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Hashable
from dataclasses import dataclass
from fractions import Fraction
from math import comb
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import mechanism_oracle as mo

AGE_LEAVES = ("a", "b", "c", "d")
AGE_CHILDREN = {"*": ("ab", "cd"), "ab": ("a", "b"), "cd": ("c", "d")}
AGE_COVER = {"*": set(AGE_LEAVES), "ab": {"a", "b"}, "cd": {"c", "d"}, **{x: {x} for x in AGE_LEAVES}}
SEX_LEAVES = ("m", "f")
SEX_CHILDREN = {"*": ("m", "f")}
SEX_COVER = {"*": set(SEX_LEAVES), "m": {"m"}, "f": {"f"}}
MAX_WORLDS = 1_500

Region = tuple[str, str]


@dataclass(frozen=True)
class Tiny:
    """One tiny instance: register leaves, values, ratio target T, presence."""

    age: tuple[str, ...]
    sex: tuple[str, ...]
    domain: tuple[str, ...]
    protected: tuple[str, ...]
    target: Fraction
    presence: bool

    def splits(self, region: Region) -> list[list[Region]]:
        """The public candidate splits of a region, in preference order (age, then sex);
        parts without any register individual are left out."""
        age, sex = region
        found = []
        if age in AGE_CHILDREN:
            found.append([(c, sex) for c in AGE_CHILDREN[age]])
        if sex in SEX_CHILDREN:
            found.append([(age, c) for c in SEX_CHILDREN[sex]])
        return [[p for p in parts if self.members(p)] for parts in found]

    def members(self, region: Region) -> list[int]:
        age, sex = AGE_COVER[region[0]], SEX_COVER[region[1]]
        return [i for i in range(len(self.age)) if self.age[i] in age and self.sex[i] in sex]


def _aggregates(inst: Tiny, world: mo.World, region: Region) -> tuple[int, dict[str, int]]:
    """Candidates (register, or present under presence) and counts per protected value."""
    inside = set(inst.members(region))
    present = [(o, v) for o, v in zip(world.rows, world.values, strict=True) if o in inside]
    n = len(present) if inst.presence else len(inside)
    return n, {s: sum(v == s for _, v in present) for s in inst.protected}


def _meets(inst: Tiny, n: int, counts: dict[str, int], inflation: Fraction = Fraction(1)) -> bool:
    return all(c == 0 or n * inflation >= inst.target * c for c in counts.values())


def _tail(total: int, part: int, holders: int, at_least: int) -> Fraction:
    """P(X ≥ at_least), X the holders among ``part`` of ``total`` candidates when
    ``holders`` of them hold the value, uniformly placed (hypergeometric)."""
    hits = sum(comb(part, k) * comb(total - part, holders - k) for k in range(max(at_least, 0), min(part, holders) + 1))
    return Fraction(hits, comb(total, holders))


def _refusal_bound(inst: Tiny, world: mo.World, region: Region, parts: list[Region]) -> Fraction:
    """L: a lower bound on P(some part violates | the region's counts)."""
    n, counts = _aggregates(inst, world, region)
    best = Fraction(0)
    for part in parts:
        m, _ = _aggregates(inst, world, part)
        for c in counts.values():
            if c:
                violating = int(Fraction(m) / inst.target) + 1  # smallest count with m < T·count
                best = max(best, _tail(n, m, c, violating))
    return best


def try_all(inst: Tiny, world: mo.World) -> list[tuple[Region, Fraction]] | None:
    """Final regions with their inflation (always 1), or None when the root violates."""
    root = ("*", "*")
    if not _meets(inst, *_aggregates(inst, world, root)):
        return None
    out: list[tuple[Region, Fraction]] = []
    stack = [root]
    while stack:
        region = stack.pop()
        for parts in inst.splits(region):
            if all(_meets(inst, *_aggregates(inst, world, p)) for p in parts):
                stack.extend(parts)
                break
        else:
            out.append((region, Fraction(1)))
    return out


def charged(inst: Tiny, world: mo.World) -> list[tuple[Region, Fraction]] | None:
    """Final regions with the inflation their charge carries, or None when refused."""

    def ok(region: Region) -> tuple[bool, list[tuple[Region, Fraction]]]:
        n, counts = _aggregates(inst, world, region)
        if not _meets(inst, n, counts):
            return False, []
        splits = inst.splits(region)
        if not splits:  # a single cell: no split to refuse, no evidence
            return True, [(region, Fraction(1))]
        parts = splits[0]  # the one public split
        below = [ok(p) for p in parts]
        if all(good for good, _ in below):
            return True, [leaf for _, leaves in below for leaf in leaves]
        bound = _refusal_bound(inst, world, region, parts)
        if bound > 0 and _meets(inst, n, counts, bound):
            return True, [(region, bound)]
        return False, []

    good, leaves = ok(("*", "*"))
    return leaves if good else None


SEARCHES = {"try-all": try_all, "charged": charged}


def _output(inst: Tiny, search: Any, world: mo.World) -> Hashable:
    leaves = search(inst, world)
    if leaves is None:
        return None
    groups = []
    for region, _ in leaves:
        inside = set(inst.members(region))
        values = tuple(sorted(v for o, v in zip(world.rows, world.values, strict=True) if o in inside))
        if values:
            groups.append((region, values))
    return tuple(sorted(groups))


def _charges(inst: Tiny, search: Any, world: mo.World) -> dict[tuple[int, str], Fraction]:
    out: dict[tuple[int, str], Fraction] = {}
    for region, inflation in search(inst, world) or []:
        n, counts = _aggregates(inst, world, region)
        eligible = [o for o in inst.members(region) if not inst.presence or o in world.rows]
        for s, c in counts.items():
            if c:
                for o in eligible:
                    out[(o, s)] = Fraction(c) / (n * inflation)
    return out


def random_instance(rng: np.random.Generator) -> tuple[Tiny, mo.World]:
    n = int(rng.integers(3, 9))
    domain = [("s1", "x"), ("s1", "s2", "x")][int(rng.integers(2))]
    inst = Tiny(
        age=tuple(AGE_LEAVES[int(i)] for i in rng.integers(0, 4, n)),
        sex=tuple(SEX_LEAVES[int(i)] for i in rng.integers(0, 2, n)),
        domain=domain,
        protected=tuple(v for v in domain if v != "x"),
        target=[Fraction(3, 2), Fraction(2), Fraction(3)][int(rng.integers(3))],
        presence=bool(rng.integers(2)),
    )
    largest = max(r for r in range(1, n + 1) if len(domain) ** r * (1 if inst.presence else comb(n, r)) <= MAX_WORLDS)
    r = int(rng.integers(1, largest + 1))
    rows = tuple(sorted(rng.permutation(n)[:r].tolist()))
    pool = ("x", "x", "x", *inst.protected)
    return inst, mo.World(rows, tuple(pool[int(i)] for i in rng.integers(0, len(pool), r)))


def measure(n_series: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    figures = {name: {"published": 0, "refused": 0, "releases_above_charge": 0, "pairs_above_1_over_T": 0,
                      "largest_posterior_minus_charge": 0.0, "groups": 0, "inflated_groups": 0}
               for name in SEARCHES}  # fmt: skip
    for _ in range(n_series):
        inst, observed = random_instance(rng)
        space = SimpleNamespace(
            presence=inst.presence, keys=np.zeros((len(inst.age), 2)), domain=inst.domain, protected=inst.protected
        )
        for name, search in SEARCHES.items():
            f = figures[name]
            leaves = search(inst, observed)
            if leaves is None:
                f["refused"] += 1
                continue
            f["published"] += 1
            f["groups"] += len(leaves)
            f["inflated_groups"] += sum(inflation < 1 for _, inflation in leaves)
            post, _ = mo.posterior(space, observed, lambda w, s=search, i=inst: _output(i, s, w))  # type: ignore[arg-type]
            charge = _charges(inst, search, observed)
            excess = max((p - charge.get(k, Fraction(0)) for k, p in post.items()), default=Fraction(0))
            f["releases_above_charge"] += excess > 0
            f["largest_posterior_minus_charge"] = max(f["largest_posterior_minus_charge"], float(excess))
            f["pairs_above_1_over_T"] += sum(p > 1 / inst.target for p in post.values())
    return {"series": n_series, "seed": seed, **figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(json.dumps(measure(args.series, args.seed), indent=2))


if __name__ == "__main__":
    main()
