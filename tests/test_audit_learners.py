"""The learning adversary's audit (serialpub.analysis.audit.learners) against a
straightforward re-implementation: per register individual, in Python loops, from the
definitions in docs/threat-model.md ("The learning adversary"), on the random tiny
published series of tests/test_audit.py."""

from __future__ import annotations

import json
import math
import random
from collections import defaultdict
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import cli
from test_audit import BF_H, BF_VALUES, _inside, _random_case, write_workspace

from anonymizer.learners import logistic as logistic_module
from serialpub.analysis.audit import audit_releases, audit_workspace
from serialpub.analysis.audit.learner_report import LearnerReport, band_edges, format_learners
from serialpub.analysis.audit.learners import EM_PASSES, LEARNERS, LearnerSeries, posteriors, reweight
from serialpub.io.hierarchies import read_hierarchies

QIS = list(BF_H)
VOCAB = {q: len({row[0] for row in rows}) for q, rows in BF_H.items()}  # leaves per QI

Pair = tuple[str, str]  # (individual id, sensitive value)


# ----------------------------------------------------------------------------- the re-implementation


class Brute:
    """The definitions, per individual. ``registers``: the register of each release (one
    row per individual, QI values as text)."""

    def __init__(self, registers: list[pd.DataFrame], releases: list[dict]) -> None:
        self.registers = [r.to_dict("records") for r in registers]
        self.releases = releases
        self.values = list(dict.fromkeys(v for r in releases for v in r["protected"]))
        self.domain = set(self.values) | {v for r in releases for v in r["data"]["disease"]}
        self.ell = releases[-1]["l"]
        self.groups = []  # per release: [(members, {value: count})]
        for people, rel in zip(self.registers, releases, strict=True):
            found: dict[tuple[str, ...], dict[str, int]] = {}
            for rec in rel["data"].itertuples(index=False):
                counts = found.setdefault((rec.age, rec.sex, rec.zone), defaultdict(int))
                counts[rec.disease] += 1
            groups = []
            for key, counts in found.items():
                box = dict(zip(QIS, key, strict=True))
                members = [p for p in people if _inside(box, p)]
                groups.append((members, dict(counts), max(len(members), sum(counts.values()))))
            self.groups.append(groups)

    def uniform(self) -> list[dict[Pair, list[float]]]:
        """p_t(o, s) = c_s(G)/|reg(G)| per release: {pair: [p of each group of o]}."""
        out = []
        for groups in self.groups:
            p: dict[Pair, list[float]] = defaultdict(list)
            for members, counts, n in groups:
                for o in members:
                    for s, c in counts.items():
                        p[(o["id"], s)].append(c / n)
            out.append(p)
        return out

    def rows(self, p: list[dict[Pair, list[float]]]) -> list[tuple[dict[str, str], str, float]]:
        """The fitting rows: (o's QI values in release t, s, Σ p_t(o, s) over o's groups of t)."""
        out = []
        for people, pt in zip(self.registers, p, strict=True):
            for o in people:
                for s in self.domain:
                    out.append((o, s, sum(pt.get((o["id"], s), []))))
        return out

    def nb(self, rows: list[tuple[dict[str, str], str, float]]) -> dict[tuple[str, ...], dict[str, float]]:
        """π by naive Bayes with Laplace 1, per QI tuple."""
        n_s: dict[str, float] = defaultdict(float)
        n_av: dict[tuple[str, str, str], float] = defaultdict(float)
        for o, s, w in rows:
            n_s[s] += w
            for q in QIS:
                n_av[(q, o[q], s)] += w
        total = sum(n_s.values())
        pi = {}
        for people in self.registers:
            for o in people:
                key = tuple(o[q] for q in QIS)
                score = {}
                for s in self.domain:
                    x = (n_s[s] + 1) / (total + len(self.domain))
                    for q in QIS:
                        x *= (n_av[(q, o[q], s)] + 1) / (n_s[s] + VOCAB[q])
                    score[s] = x
                z = sum(score.values())
                pi[key] = {s: x / z for s, x in score.items()}
        return pi

    def reweight(self, pi: dict[tuple[str, ...], dict[str, float]]) -> list[dict[Pair, list[float]]]:
        """p'_t(o, s) = min(1, c_s(G) π(o, s) / Σ_{o'∈G} π(o', s))."""
        out = []
        for groups in self.groups:
            p: dict[Pair, list[float]] = defaultdict(list)
            for members, counts, _ in groups:
                for s in self.domain:
                    c = counts.get(s, 0)
                    total = sum(pi[tuple(o[q] for q in QIS)][s] for o in members)
                    for o in members:
                        p[(o["id"], s)].append(min(1.0, c * pi[tuple(o[q] for q in QIS)][s] / total))
            out.append(p)
        return out

    def posterior(self, p: list[dict[Pair, list[float]]]) -> dict[Pair, float]:
        """P'(o, s) = 1 − Π_t Π (1 − p'_t) for every individual and protected value."""
        ids = {o["id"] for people in self.registers for o in people}
        out = {}
        for i in ids:
            for s in self.values:
                survival = 1.0
                for pt in p:
                    for x in pt.get((i, s), []):
                        survival *= 1 - x
                out[(i, s)] = 1 - survival
        return out

    def learner(self, name: str) -> dict[Pair, float]:
        p = self.uniform()
        if name == "uniform":
            return self.posterior(p)
        p = self.reweight(self.nb(self.rows(p)))
        for _ in range(EM_PASSES.get(name, 0)):
            p = self.reweight(self.nb(self.rows(p)))
        return self.posterior(p)


def module_posteriors(report: LearnerReport, names: tuple[str, ...]) -> dict[str, dict[Pair, float]]:
    """The module's P' per (individual, protected value), from its serial cells."""
    series: LearnerSeries = report.inputs
    out = {}
    for name, p, _, _ in posteriors(series, names):
        out[name] = {
            (str(i), v): float(p[series.code[k], j])
            for k, i in enumerate(series.ids)
            for j, v in enumerate(series.values)
        }
    return out


# ----------------------------------------------------------------------------- the learners


def _case(tmp_path: Path, seed: int) -> tuple[pd.DataFrame, list[dict], Path]:
    register, releases = _random_case(seed)
    return register, releases, write_workspace(tmp_path / "ws", register, BF_H, releases)


#: the random cases of tests/test_audit.py the learners are checked on: 27 and 38 publish
#: overlapping regions (a cell in two groups of one release)
SEEDS = [*range(12), 27, 38]


@pytest.mark.parametrize("seed", SEEDS)
def test_nb_and_em_equal_the_per_individual_definitions(tmp_path: Path, seed: int) -> None:
    register, releases, ws = _case(tmp_path, seed)
    names = ("nb", "nb-em3")
    report = audit_workspace(ws, learners=names).learners
    assert report is not None
    if seed in (27, 38):
        assert not all(r.disjoint for r in report.inputs.releases)
    if any(r["dilution"] == "presence" for r in releases):
        assert any("presence known" in n for n in report.notes)
    got = module_posteriors(report, names)
    brute = Brute([register] * len(releases), releases)
    for name in ("uniform", *names):
        expected = brute.learner(name)
        assert got[name].keys() == expected.keys()
        for pair, x in expected.items():
            assert got[name][pair] == pytest.approx(x, abs=1e-9), (name, pair)


def test_the_uniform_learner_is_the_audits_charge(tmp_path: Path) -> None:
    """Under register dilution, the ``uniform`` row's P' is the audit's p (paper 004, Lemma 4)."""
    for seed in range(20):
        register, releases = _random_case(seed)
        if any(r["dilution"] != "register" for r in releases):
            continue
        result = audit_workspace(write_workspace(tmp_path / str(seed), register, BF_H, releases), learners=("nb",))
        assert result.learners is not None
        assert result.learners.learners[0].max_p == pytest.approx(result.max_p, abs=1e-12)


def test_an_evolving_register_reads_each_individual_in_each_release_with_its_values(tmp_path: Path) -> None:
    """A register that changes between releases: an individual is a candidate only where
    that release's register holds them, with that release's QI values, and fits one row per
    release (docs/threat-model.md). Here people leave, join and age, and some group holds
    more records than its region's register individuals (|reg(G)| is then its records)."""
    rng = random.Random(5)
    register, releases = _random_case(3)
    ws = write_workspace(tmp_path / "ws", register, BF_H, releases)
    registers = [register]
    for t in range(1, len(releases)):
        nxt = registers[-1].sample(frac=0.7, random_state=t).copy()
        nxt.loc[nxt.index[:2], "age"] = [str(rng.randrange(8)) for _ in range(2)]
        joiner = {"id": f"j{t}", "age": str(rng.randrange(8)), "sex": rng.choice("MF"), "zone": rng.choice("abc")}
        registers.append(pd.concat([nxt, pd.DataFrame([joiner])], ignore_index=True))
    hierarchies = read_hierarchies(ws / "hierarchies", QIS)
    folders = sorted((ws / "releases" / "clinic").iterdir())
    read = [(d, json.loads((d / "manifest.json").read_text()), pd.read_parquet(d / "data.parquet")) for d in folders]
    names = ("nb", "nb-em3")
    report = audit_releases(registers, "id", hierarchies, read, learners=names).learners
    assert report is not None
    got = module_posteriors(report, names)
    brute = Brute(registers, releases)
    assert any(n > len(members) for groups in brute.groups for members, _, n in groups)
    for name in ("uniform", *names):
        expected = brute.learner(name)
        assert got[name].keys() == expected.keys()
        for pair, x in expected.items():
            assert got[name][pair] == pytest.approx(x, abs=1e-9), (name, pair)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_logistic_reweighting_equals_the_definitions_and_the_fit_reaches_its_tolerance(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given the module's fitted π, the re-weighting and P' equal the per-individual
    definitions; the soft labels are E; the features are the leaves and the leaf pairs with
    the minimum support; and the objective's gradient, recomputed per individual, is within
    the tolerance at the fit."""
    monkeypatch.setattr(logistic_module, "MIN_PAIR_SUPPORT", 3)  # tiny registers: let some pairs in
    register, releases, ws = _case(tmp_path, seed)
    report = audit_workspace(ws, learners=("logistic-pairs",)).learners
    assert report is not None
    series: LearnerSeries = report.inputs
    brute = Brute([register] * len(releases), releases)
    start, _ = reweight(series, None)
    fit = logistic_module.fit_logistic(series, start)
    assert fit.note is None and fit.gradient <= logistic_module.GTOL

    # the soft labels: m_c E(c, s) per cell is Σ over the cell's individuals of E(o, s)
    cells = series.versions[0]
    people = register.to_dict("records")
    labels = {q: series.vocab[a] for a, q in enumerate(QIS)}
    cell_of = {tuple(labels[q][int(x)] for q, x in zip(QIS, row, strict=True)): c for c, row in enumerate(cells.leaves)}
    e: dict[Pair, float] = defaultdict(float)
    for o, s, w in brute.rows(brute.uniform()):
        e[(o["id"], s)] += w
    for c_key, c in cell_of.items():
        members = [o for o in people if tuple(o[q] for q in QIS) == c_key]
        for j, s in enumerate(series.domain):
            assert start[0][c, j] == pytest.approx(sum(e[(o["id"], s)] for o in members), abs=1e-9)

    # the re-weighting with the module's π
    pi = {key: dict(zip(series.domain, map(float, fit.pi[0][c]), strict=True)) for key, c in cell_of.items()}
    expected = brute.posterior(brute.reweight(pi))
    got = module_posteriors(report, ("logistic-pairs",))["logistic-pairs"]
    for pair, x in expected.items():
        assert got[pair] == pytest.approx(x, abs=1e-9), pair

    # the features, and the gradient of the documented objective per individual
    support: dict[tuple[int, int, str, str], int] = defaultdict(int)
    for o in people:
        for (a, qa), (b, qb) in combinations(enumerate(QIS), 2):
            support[(a, b, o[qa], o[qb])] += 1
    names = [((a,), (labels[q][v],)) for a, q in enumerate(QIS) for v in range(len(labels[q]))]
    names += [((a, b), (va, vb)) for (a, b, va, vb), n in support.items() if n >= logistic_module.MIN_PAIR_SUPPORT]
    module_names = [(f[0], tuple(labels[QIS[a]][v] for a, v in zip(f[0], f[1], strict=True))) for f in fit.features]
    assert sorted(module_names) == sorted(names)
    column = {name: k for k, name in enumerate(module_names)}
    total = sum(e.values())
    grad_w = np.zeros_like(fit.coef)
    grad_b = np.zeros_like(fit.intercept)
    for o in people:
        on = [column[((a,), (o[q],))] for a, q in enumerate(QIS)]
        on += [
            column[key]
            for (a, qa), (b, qb) in combinations(enumerate(QIS), 2)
            if (key := ((a, b), (o[qa], o[qb]))) in column
        ]
        z = [sum(fit.coef[k, j] for k in on) + fit.intercept[j] for j in range(len(series.domain))]
        top = max(z)
        lse = top + math.log(sum(math.exp(x - top) for x in z))
        y = [e[(o["id"], s)] for s in series.domain]
        for j in range(len(series.domain)):
            g = (sum(y) * math.exp(z[j] - lse) - y[j]) / total
            grad_b[j] += g
            for k in on:
                grad_w[k, j] += g
    grad_w += logistic_module.L2 * fit.coef
    assert max(np.abs(grad_w).max(), np.abs(grad_b).max()) <= logistic_module.GTOL + 1e-12


# ----------------------------------------------------------------------------- the report


def _snapshots(ws: Path, register: pd.DataFrame, releases: list[dict], seed: int) -> dict[Pair, bool]:
    """snapshot-P<k>.csv per release (random individuals and values); the true pairs."""
    rng = random.Random(seed)
    folder = ws / "snapshots"
    folder.mkdir()
    true = {}
    for k, _ in enumerate(releases, start=1):
        ids = rng.sample(list(register["id"]), rng.randint(1, len(register)))
        values = [rng.choice(BF_VALUES) for _ in ids]
        pd.DataFrame({"id": ids, "disease": values}).to_csv(folder / f"snapshot-P{k}.csv", index=False)
        true |= {(i, v): True for i, v in zip(ids, values, strict=True)}
    return true


@pytest.mark.parametrize("seed", [0, 1, 2, 5, 7])
def test_the_calibration_is_a_count_of_the_true_pairs(tmp_path: Path, seed: int) -> None:
    register, releases, ws = _case(tmp_path, seed)
    names = ("nb", "nb-em3")
    plain = audit_workspace(ws, learners=names).learners
    assert plain is not None and not plain.calibrated
    assert all(f.above_true is None and all(b.true is None for b in f.bands) for f in plain.learners)
    assert "true of them" in format_learners(plain) and "fraction true" not in format_learners(plain)

    true = _snapshots(ws, register, releases, seed)
    report = audit_workspace(ws, snapshots=ws / "snapshots", learners=names).learners
    assert report is not None and report.calibrated
    got = module_posteriors(report, names)
    # under presence the audit's cells are individuals here; the learners work on QI cells all the same
    assert [v.counts.size for v in report.inputs.versions] == [len(register.drop_duplicates(QIS))]
    brute = Brute([register] * len(releases), releases)
    for name in ("uniform", *names):
        for pair, x in brute.learner(name).items():
            assert got[name][pair] == pytest.approx(x, abs=1e-9), (name, pair)
    bound = 1 / report.ell
    below, above = band_edges(report.ell)
    for figures in report.learners:
        p = got[figures.name]
        over = [pair for pair, x in p.items() if x > bound]
        assert figures.above == len(over)
        assert figures.above_true == sum(pair in true for pair in over)
        for band in figures.bands:
            if band.above:
                inside = [pair for pair, x in p.items() if band.low < x <= band.high]
            else:
                inside = [
                    pair for pair, x in p.items() if band.low <= x < band.high or (band.closed and x == band.high)
                ]
            assert (band.pairs, band.true) == (len(inside), sum(pair in true for pair in inside)), band
        assert sum(b.pairs for b in figures.bands) == len(p) == report.pairs
        assert [b.low for b in figures.bands] == [*below[:-1], *above[:-1]]
        best = max(p.values())
        assert figures.max_p == best and p[(figures.max_individual, figures.max_value)] == best


def test_the_learners_are_deterministic(tmp_path: Path) -> None:
    _, _, ws = _case(tmp_path, 4)
    runs = [audit_workspace(ws, learners=LEARNERS).learners for _ in range(2)]
    assert runs[0] is not None and runs[1] is not None
    strip = [[(f.name, f.max_p, f.above, f.bands) for f in r.learners] for r in runs]  # not the seconds
    assert strip[0] == strip[1]


def test_audit_prints_the_learners_above_the_verdict_line_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    _, _, ws = _case(tmp_path, 2)
    out = cli("audit", ws)
    assert out.returncode in (0, 1, 6), out.stdout + out.stderr
    text = out.stdout
    # the learners' table stands above the verdict, which stays the last line
    assert text.index("learning adversary") < text.index("verdict:") and "logistic-pairs" in text
    assert text.rstrip().splitlines()[-1].startswith("verdict: ")
    report = audit_workspace(ws, snapshots=None, learners=LEARNERS).learners
    assert report is not None
    report.pairs = 99_999_999  # the console wraps what is longer: the tables must not need it (notes are prose)
    assert all(len(line) <= 120 for line in format_learners(report).splitlines() if not line.startswith("note:"))
    quiet = cli("audit", ws, "--learners", "none")
    assert quiet.returncode == out.returncode and "learning adversary" not in quiet.stdout
    one = cli("audit", ws, "--learners", "nb")
    assert "  nb " in one.stdout and "logistic-pairs" not in one.stdout
    bad = cli("audit", ws, "--learners", "nb,forest")
    assert bad.returncode == 2 and "--learners" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
