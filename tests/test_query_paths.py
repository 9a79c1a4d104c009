"""The data user's batch paths against the definitions they replaced, on random inputs: the
published figures must not move by one bit.

- c_S(G) summed once per distinct set of values for a whole batch (``anonymizer.joint``), or
  per chunk from the coded sets, against the earlier per-chunk sum over a (queries × values)
  float mask: every field of ``joint_answers`` bit for bit;
- the queries' leaf masks built from each distinct condition once and gathered
  (``serialpub.analysis.querying._ranges``), against one condition and one query at a time;
- a batch's JSON written column by column (``serialpub.cli.data_user``) against
  ``json.dumps``.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pytest

import anonymizer.joint as joint
from anonymizer.arrays import factorize, row_keys
from anonymizer.hierarchy import Hierarchy
from anonymizer.intervals import release_hierarchies
from anonymizer.queries import _overlap_fractions
from anonymizer.workload import QueryRanges
from serialpub.analysis import querying
from serialpub.analysis.querying import Condition, Query
from serialpub.errors import InputError

ZONES = {"a": "ab", "b": "ab", "c": "cd", "d": "cd", "e": "ef", "f": "ef"}
AGES = [str(x) for x in range(20, 32)]
QIS = ("zone", "age", "sex")
VALUES = tuple(f"v{k:02d}" for k in range(24))
H = {
    "zone": Hierarchy.from_rows("zone", [(i + 1, (z, m, "*")) for i, (z, m) in enumerate(ZONES.items())], "zone"),
    "age": Hierarchy.from_rows("age", [(i + 1, (a, f"{a[0]}x", "*")) for i, a in enumerate(AGES)], "age"),
    "sex": Hierarchy.from_rows("sex", [(1, ("M", "*")), (2, ("F", "*"))], "sex"),
}


def _release(seed: int) -> joint.JointRelease:
    """A random release over a random register: each QI kept, generalized one level or to
    ``*`` (global recoding, so the regions are disjoint), skewed sensitive values of which a
    few are never published, and a few register cells in no region."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 400))
    register = pd.DataFrame({q: rng.choice(list(H[q].leaves), n) for q in QIS})
    published = register.sample(frac=float(rng.uniform(0.3, 0.9)), random_state=seed).reset_index(drop=True)
    for q in QIS:
        level = int(rng.integers(1 if q == "zone" else 0, 3 if q != "sex" else 2))  # zone always generalized
        if level:
            node = H[q].leaf_nodes[min(level, H[q].depth - 1), H[q].leaf_codes(published[q])]
            published[q] = np.asarray(H[q].labels, dtype=object)[node]
    weights = rng.random(len(VALUES)) ** 3
    weights[rng.choice(len(VALUES), 3, replace=False)] = 0  # never published
    published["s"] = rng.choice(VALUES, len(published), p=weights / weights.sum())
    leaves = np.stack([H[q].leaf_codes(register[q]) for q in QIS], axis=1)
    hs = release_hierarchies(H, [], published)
    return joint.JointRelease.of(published, QIS, "s", [hs[q] for q in QIS], leaves, VALUES, int(rng.integers(0, 3)))


def _ranges(rng: np.random.Generator, q: int) -> QueryRanges:
    """Random queries: some QIs unconstrained, value sets drawn from a few (so that queries
    share them, as a batch's do), over a domain holding a value no release has."""
    masks = {}
    for a in QIS:
        m = rng.random((q, H[a].n_leaves)) < 0.5
        m[rng.random(q) < 0.4] = True
        masks[a] = m
    domain = (*VALUES[::-1], "not-published")
    pool = rng.random((int(rng.integers(1, 6)), len(domain))) < 0.5
    sensitive = pool[rng.integers(0, pool.shape[0], q)]
    own = rng.random(q) < 0.2  # a few queries count a set of their own
    sensitive[own] = rng.random((int(own.sum()), len(domain))) < 0.5
    return QueryRanges(masks, domain, sensitive)


# -- the definitions replaced (as they were), to compare against ------------------------


def _old_chunk_counts(counts: Any, s_mask: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    g = counts.shape[0]
    sets, set_of = np.unique(s_mask, axis=0, return_inverse=True)
    per_set = np.zeros((sets.shape[0], g), dtype=np.float64)
    if counts.starts.size:
        step = max(1, joint.CHUNK_ELEMENTS // counts.column.size)
        for start in range(0, sets.shape[0], step):
            held = sets[start : start + step][:, counts.column] * counts.count
            per_set[start : start + step, counts.groups] = np.add.reduceat(held, counts.starts, axis=1)
    return per_set[set_of.reshape(-1)]


def _old_uniform(fractions: list[Any], nodes: list[Any], cs: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    if not fractions:
        return cs.sum(axis=1)
    meets = (fractions[0] > 0)[:, nodes[0]]
    for f, n in zip(fractions[1:], nodes[1:], strict=True):
        meets &= (f > 0)[:, n]
    at, grp = np.nonzero(meets)
    value = cs[at, grp]
    for f, n in zip(fractions, nodes, strict=True):
        value = value * f[at, n[grp]]
    return np.asarray(np.bincount(at, weights=value, minlength=cs.shape[0]), dtype=np.float64)


def _old_answers(release: joint.JointRelease, ranges: QueryRanges) -> joint.JointAnswers:
    """``joint_answers`` as it was: c_S(G) per chunk over a (Q, V) float mask of the values."""
    q, names = ranges.n_queries, list(release.qis)
    index = {v: k for k, v in enumerate(ranges.sensitive_values)}
    pos = np.array([index.get(v, -1) for v in release.sensitive_values], dtype=np.intp)
    s_mask = np.zeros((q, len(release.sensitive_values)), dtype=np.float64)
    held = pos >= 0
    s_mask[:, held] = ranges.sensitive[:, pos[held]]
    counts = joint.GroupValueCounts.of_dense(release.counts)
    n_g = release.register_in_group.astype(np.float64)
    g = release.counts.shape[0]
    estimate, uniform, variance = (np.zeros(q) for _ in range(3))
    lower, upper = np.zeros(q, dtype=np.int64), np.zeros(q, dtype=np.int64)
    generalized = np.zeros((q, len(names)), dtype=bool)
    constrained = np.zeros((q, len(names)), dtype=bool)
    for i, a in enumerate(names):
        if a in ranges.qi:
            constrained[:, i] = ~ranges.qi[a].all(axis=1)
    patterns, pattern_of = np.unique(constrained, axis=0, return_inverse=True)
    pattern_of = pattern_of.reshape(-1)
    covered = release.group_of_cell >= 0
    spans = [h.index for h in release.hierarchies]
    with np.errstate(invalid="ignore", divide="ignore"):
        share_den = np.where(n_g > 0, 1.0 / n_g, 0.0)
    for p, pattern in enumerate(patterns):
        queries = np.flatnonzero(pattern_of == p)
        attrs = [int(a) for a in np.flatnonzero(pattern)]
        cols = [release.group_of_cell[covered], *(release.cell_leaves[covered, k] for k in attrs)]
        radices = [g, *(release.hierarchies[k].n_leaves for k in attrs)]
        rows, first = factorize(row_keys(np.stack(cols, axis=1), radices))
        by_group = np.argsort(cols[0][first], kind="stable")
        renumber = np.empty_like(by_group)
        renumber[by_group] = np.arange(by_group.size, dtype=by_group.dtype)
        rows, first = renumber[rows], first[by_group]
        weight = np.bincount(rows, weights=release.cell_counts[covered], minlength=first.size).astype(np.float64)
        row_group, row_leaves = cols[0][first], [c[first] for c in cols[1:]]
        step = max(1, joint.CHUNK_ELEMENTS // max(first.size, g, 1))
        for start in range(0, queries.size, step):
            chunk = queries[start : start + step]
            c_s = _old_chunk_counts(counts, s_mask[chunk])
            at, grp, in_q = joint._in_query(
                ranges, [names[k] for k in attrs], row_leaves, row_group, weight, chunk, n_g
            )
            cs = c_s[at, grp]
            estimate[chunk] = np.bincount(at, weights=cs * in_q * share_den[grp], minlength=chunk.size)
            fractions = [_overlap_fractions(ranges.qi[names[k]][chunk], spans[k]) for k in attrs]
            uniform[chunk] = _old_uniform(fractions, [release.group_nodes[:, k] for k in attrs], c_s)
            low = np.maximum(0.0, cs - (n_g[grp] - in_q))
            lower[chunk] = np.rint(np.bincount(at, weights=low, minlength=chunk.size)).astype(np.int64)
            high = np.minimum(cs, in_q)
            upper[chunk] = np.rint(np.bincount(at, weights=high, minlength=chunk.size)).astype(np.int64)
            var = joint.allocation_variance(cs, in_q, n_g[grp])
            variance[chunk] = np.bincount(at, weights=var, minlength=chunk.size)
            for f, k in zip(fractions, attrs, strict=True):
                part = f[at, release.group_nodes[grp, k]]
                generalized[chunk[at[(var > 0) & (part > 0) & (part < 1)]], k] = True
    return joint.JointAnswers(estimate, lower, upper + release.suppressed, uniform, variance, generalized)


def _old_mask(c: Condition, h: Hierarchy) -> npt.NDArray[np.bool_]:
    """``Condition.mask`` as it was: the ancestor matrix and leaf numbers made per call."""
    anc = h.index.ancestor_matrix()
    text = c.value.strip()
    if h.has_label(text):
        return np.asarray(anc[:, h.node(text)])
    parts = [p.strip() for p in text.split("|")]
    if text and all(h.has_label(p) for p in parts):
        return np.asarray(anc[:, [h.node(p) for p in parts]].any(axis=1))
    numbers = h.leaf_numbers() if h.numeric else None
    lo = hi = None
    if len(parts) == 1 and (m := querying._RANGE.match(text)) is not None:
        lo, hi = m.group(1), m.group(2)
    elif len(parts) == 1 and (m := querying._HALF.match(text)) is not None:
        lo, hi = (m.group(2), None) if m.group(1) == ">=" else (None, m.group(2))
    if (lo is None and hi is None) or numbers is None:
        raise InputError(f"--where {c}: not resolved")
    inside = (numbers >= (-np.inf if lo is None else float(lo))) & (numbers <= (np.inf if hi is None else float(hi)))
    if not inside.any():
        raise InputError(f"--where {c}: empty")
    return np.asarray(inside)


def _old_ranges(release: Any, queries: Sequence[Query], domain: list[str], s_sets: list[list[str]]) -> QueryRanges:
    masks: dict[str, npt.NDArray[np.bool_]] = {}
    seen: dict[Condition, npt.NDArray[np.bool_]] = {}
    for i, q in enumerate(queries):
        for c in q.conditions:
            h = release.hierarchies[c.attribute]
            if c not in seen:
                seen[c] = _old_mask(c, h)
            if c.attribute not in masks:
                masks[c.attribute] = np.ones((len(queries), h.n_leaves), dtype=bool)
            masks[c.attribute][i] &= seen[c]
    s_mask = np.zeros((len(queries), len(domain)), dtype=bool)
    position = {v: k for k, v in enumerate(domain)}
    for i, values in enumerate(s_sets):
        s_mask[i, [position[v] for v in values]] = True
    return QueryRanges(masks, tuple(domain), s_mask)


# -- the comparisons ---------------------------------------------------------------------


def _same_bits(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> bool:
    """Equal shapes, dtypes and bytes (so 0.0 and -0.0, or two NaNs, are told apart)."""
    return a.shape == b.shape and a.dtype == b.dtype and np.ascontiguousarray(a).tobytes() == b.tobytes()


@pytest.mark.parametrize("seed", range(12))
def test_the_answers_are_those_of_the_per_chunk_definition_to_the_bit(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = _release(seed)
    ranges = _ranges(np.random.default_rng(100 + seed), int(np.random.default_rng(seed).integers(1, 120)))
    assert len(set(map(bytes, ranges.sensitive))) < ranges.n_queries or ranges.n_queries < 3, "no shared value set"
    old = _old_answers(release, ranges)
    runs = [joint.joint_answers(release, ranges)]
    monkeypatch.setattr(joint, "SET_ELEMENTS", 0)  # each chunk sums its own sets
    runs.append(joint.joint_answers(release, ranges))
    monkeypatch.setattr(joint, "CHUNK_ELEMENTS", 64)  # many chunks, each of a few queries
    runs.append(joint.joint_answers(release, ranges))
    monkeypatch.setattr(joint, "SET_ELEMENTS", 1 << 23)
    runs.append(joint.joint_answers(release, ranges))
    assert old.se.sum() > 0, "no uncertain answer: the comparison tests little"
    for new in runs:
        for name in ("estimate", "lower", "upper", "uniform", "variance", "generalized"):
            assert _same_bits(getattr(new, name), getattr(old, name)), name
    product = joint.joint_estimates(release, ranges, uniform=True, sparse_product=True)
    assert _same_bits(product[0], old.estimate) and _same_bits(product[1], old.uniform)


def test_no_query_and_no_value_give_what_they_gave() -> None:
    release = _release(3)
    empty = QueryRanges(
        {q: np.ones((0, H[q].n_leaves), dtype=bool) for q in QIS}, VALUES, np.zeros((0, len(VALUES)), dtype=bool)
    )
    none = QueryRanges({}, (), np.zeros((4, 0), dtype=bool))
    for ranges in (empty, none):
        old, new = _old_answers(release, ranges), joint.joint_answers(release, ranges)
        for name in ("estimate", "lower", "upper", "uniform", "variance", "generalized"):
            assert _same_bits(getattr(new, name), getattr(old, name)), name


def _conditions(rng: np.random.Generator) -> list[Condition]:
    """Conditions as written: leaves, nodes, unions, ranges and half-ranges on the numeric QI."""
    written: list[Condition] = []
    for q in QIS:
        labels = list(H[q].labels)
        written += [Condition(q, str(rng.choice(labels))) for _ in range(4)]
        written.append(Condition(q, f"{rng.choice(labels)}|{rng.choice(labels)}"))
    for _ in range(8):
        lo = int(rng.integers(20, 32))
        written.append(Condition("age", f"[{lo}, {lo + int(rng.integers(0, 6))}]"))
    written += [Condition("age", f">={int(rng.integers(20, 31))}"), Condition("age", f"<= {int(rng.integers(20, 31))}")]
    return written


@pytest.mark.parametrize("seed", range(8))
def test_the_masks_are_those_of_one_condition_and_one_query_at_a_time(seed: int) -> None:
    rng = np.random.default_rng(seed)
    release = SimpleNamespace(number=1, qis=list(QIS), hierarchies=H)
    pool = _conditions(rng)
    domain = list(VALUES)
    queries, s_sets = [], []
    for i in range(int(rng.integers(1, 300))):
        # up to four conditions, the same QI possibly twice (ANDed)
        picked = tuple(pool[k] for k in rng.integers(0, len(pool), int(rng.integers(0, 5))))
        queries.append(Query(picked, None, f"q.txt, line {i + 1}"))
        s_sets.append(
            domain if rng.random() < 0.5 else list(rng.choice(domain, int(rng.integers(1, 4)), replace=False))
        )
    old = _old_ranges(release, queries, domain, s_sets)
    distinct = sorted({tuple(v) for v in s_sets})
    s_of = np.array([distinct.index(tuple(v)) for v in s_sets], dtype=np.int64)
    new = querying._ranges(release, queries, domain, [list(v) for v in distinct], s_of)  # type: ignore[arg-type]
    assert list(new.qi) == list(old.qi) and new.sensitive_values == old.sensitive_values
    for a in old.qi:
        assert _same_bits(new.qi[a], old.qi[a]), a
    assert _same_bits(new.sensitive, old.sensitive)


def test_the_first_condition_a_release_cannot_resolve_is_named_with_its_line() -> None:
    release = SimpleNamespace(number=4, qis=["zone", "age"], hierarchies=H)
    queries = [
        Query((Condition("zone", "a"),), None, "q.txt, line 1"),
        Query((Condition("age", "[20,22]"), Condition("zone", "nowhere")), None, "q.txt, line 2"),
        Query((Condition("sex", "F"),), None, "q.txt, line 3"),
    ]
    with pytest.raises(InputError, match=r"^q\.txt, line 2: zone=nowhere: 'nowhere' is not a value of zone"):
        querying._ranges(release, queries, ["v00"], [["v00"]], np.zeros(3, dtype=np.int64))  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"^q\.txt, line 3: sex=F: release 4 does not publish sex"):
        querying._ranges(release, [queries[0], queries[2]], ["v00"], [["v00"]], np.zeros(2, dtype=np.int64))  # type: ignore[arg-type]
