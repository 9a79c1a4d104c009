"""The release and series reports: the guarantee's figures against brute force and
against independent recomputations (the audit, the state after publication, a workspace
published under the localized guarantee), the files and checksums a release carries, and
the ``serialpub report`` command.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import PublishedWorkspaces
from helpers import DISEASES, cli, make_workspace, read_config, refused_series, snapshot, write_config
from hypothesis import given, settings
from hypothesis import strategies as st

from anonymizer.measures.guarantee import BINS, breach_distribution, ratio_budget
from serialpub.analysis.audit import audit_workspace
from serialpub.config import load_config
from serialpub.io import release_files
from serialpub.report.series import SERIES_HTML, SERIES_JSON
from serialpub.workflow.publisher import Publisher

# -- the guarantee's figures against the pairs written out one by one ---------------------

weighted_pairs = st.lists(
    st.tuples(
        st.sampled_from([0.0, 0.05, 0.2, 0.33, 1 - 2 / 3, 0.44, 0.45, 0.4999, 0.5, 0.5001, 0.75, 1.0]),
        st.integers(0, 4),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(weighted_pairs, st.sampled_from([2.0, 3.0, 2.5]), st.sampled_from([0.9, 0.5, 1.0]))
def test_breach_distribution_counts_every_pair_once(rows: list[tuple[float, int]], ell: float, near: float) -> None:
    p = np.array([r[0] for r in rows], dtype=float)
    w = np.array([r[1] for r in rows], dtype=np.int64)
    d = breach_distribution(p, w, ell, near)
    pairs = [pv for pv, wt in rows for _ in range(wt) if pv > 0]  # one entry per individual
    assert d.pairs == len(pairs)
    assert d.max_p == (max(pairs) if pairs else 0.0)
    assert d.mean_p == pytest.approx(sum(pairs) / len(pairs) if pairs else 0.0, rel=1e-12)
    above = [x > 1 / ell + 1e-12 for x in pairs]  # a pair at the bound is allowed, however it rounds
    assert d.above_bound == sum(above)
    assert d.near_bound == sum(1 for x, a in zip(pairs, above, strict=True) if near / ell <= x and not a)
    assert d.counts.sum() == len(pairs) and d.counts.shape == (BINS,)
    for x in pairs:  # each pair lies in the bin whose edges enclose it
        b = min(int(np.searchsorted(d.edges, x, side="right")) - 1, BINS - 1)
        assert d.edges[b] <= x <= d.edges[b + 1] and d.counts[b] > 0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 3)), max_size=20), st.integers(1, 5))
def test_ratio_budget_against_the_pairs_written_out(rows: list[tuple[int, int]], k_prime: int) -> None:
    linked = [c for c, w in rows for _ in range(w) if c > 0]
    b = ratio_budget(np.array([r[0] for r in rows]), np.array([r[1] for r in rows]), k_prime)
    assert b.max_linked == max(linked, default=0)
    assert b.releases_left == k_prime - max(linked, default=0)
    assert b.pairs_at_budget == sum(1 for c in linked if c >= k_prime)
    assert b.linked_histogram.tolist() == [linked.count(i) for i in range(1, max([k_prime, *linked]) + 1)]


def test_a_pair_at_the_bound_is_not_above_it_and_exact_verdicts_win() -> None:
    at_bound = 1.0 - 2.0 / 3.0  # p = 1 - (n_j - n_s)/n_j with n_s/n_j = 1/3 at ℓ = 3: 0.33333333333333337
    assert at_bound > 1.0 / 3.0
    d = breach_distribution([at_bound, 0.2], [5, 1], 3.0)
    assert (d.above_bound, d.near_bound) == (0, 5)
    exact = breach_distribution([at_bound, 0.2], [5, 1], 3.0, exceeds=[True, False])
    assert (exact.above_bound, exact.near_bound) == (5, 0)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        breach_distribution([1.5], [1], 2)
    with pytest.raises(ValueError, match="greater than 1"):
        breach_distribution([0.5], [1], 1)
    with pytest.raises(ValueError, match="non-negative"):
        ratio_budget([-1], [1], 3)


# -- a published series -----------------------------------------------------------------


@pytest.fixture(scope="module")
def series(tmp_path_factory: pytest.TempPathFactory, published_workspaces: PublishedWorkspaces) -> Path:
    """The small clinic workspace with its three releases published (SQLite): a private copy."""
    return published_workspaces.copy(tmp_path_factory.mktemp("report") / "ws", releases=3)


def _report(root: Path, seq: int) -> dict:
    folder = load_config(root).dataset_dir / release_files.release_name(seq)
    return json.loads((folder / "report.json").read_text(encoding="utf-8"))


@pytest.mark.slow
def test_every_release_carries_its_report_and_the_manifest_checksums_it(series: Path) -> None:
    ws = load_config(series)
    for seq in (1, 2, 3):
        folder = ws.dataset_dir / release_files.release_name(seq)
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        assert manifest["report"] == {
            name: release_files.sha256_file(folder / name) for name in ("report.html", "report.json")
        }
        # the approver's sign-off names the page they saw
        assert manifest["sign_off"]["report_sha256"] == manifest["report"]["report.html"]
        page = (folder / "report.html").read_text(encoding="utf-8")
        assert f"release {seq} (period {seq:04d})" in page and page.count("<svg") == 2
        # the search that formed the groups is named (the adversary is assumed to know it)
        assert manifest["algorithm"] == "topdown" and "top-down: the QI domain split region by region" in page
        # and whether its partition is evidence: the default decides on published counts only
        assert manifest["partition_model"] == "published"
        assert "every split decided on counts this release publishes (partition model" in page
        assert "<script" not in page and not re.search(r'(src|href)="https?://', page)  # self-contained


def test_report_max_p_equals_the_audits_recomputation(series: Path) -> None:
    audit = audit_workspace(series)
    assert audit.ok
    for seq, expected in zip(audit.releases, audit.max_p_by_release, strict=True):
        assert _report(series, seq)["breach_distribution"]["max_p"] == pytest.approx(expected, abs=1e-12)


def test_report_pairs_and_budget_equal_the_state_after_publication(series: Path) -> None:
    """Release 3's report was computed before release 3 counted (from the state before it
    and the breach table of the staged files); the state after it is the anonymizer's."""
    ws = load_config(series)
    publisher = Publisher(ws)
    history = publisher.statistics.load(publisher.store.latest_statistics("clinic"), np.full(60, 2.0))
    survival, linked = history.dense()
    p = 1.0 - survival
    rep = _report(series, 3)
    dist, budget = rep["breach_distribution"], rep["ratio_budget"]
    assert dist["pairs"] == int((p > 0).sum())
    assert dist["near_bound"] == int(((p >= 0.9 / 2) & (p <= 0.5)).sum())
    assert dist["counts"] == np.histogram(p[p > 0], bins=np.linspace(0, 1, BINS + 1))[0].tolist()
    assert budget["max_linked"] == int(linked.max())
    assert budget["releases_left"] == 3 - int(linked.max())


@pytest.mark.slow
def test_series_report_baseline_equals_a_workspace_published_under_the_localized_guarantee(
    series: Path, tmp_path: Path
) -> None:
    out = Publisher(load_config(series)).series_report()
    assert out.name == SERIES_HTML and out.is_file()
    record = json.loads((out.parent / SERIES_JSON).read_text(encoding="utf-8"))
    assert [r["release"] for r in record["releases"]] == [1, 2, 3]

    # the same snapshots (same seed) published under the localized baseline
    local = make_workspace(tmp_path / "local", guarantee="localized")
    publisher = Publisher(load_config(local))
    published = [publisher.publish(snapshot(local, t)) for t in (1, 2, 3)]
    assert record["baseline"]["max_p"] == pytest.approx(
        [json.loads((o.directory / "manifest.json").read_text())["max_breach_probability"] for o in published],
        abs=1e-12,
    )
    assert record["baseline"]["note"] == "replayed all 3 releases"
    html = out.read_text(encoding="utf-8")
    assert "Localized baseline" in html and html.count("<svg") == 2


def test_cli_report_writes_the_series_and_finds_a_release_report(series: Path, tmp_path: Path) -> None:
    run = ["report", "--config", str(series)]
    done = cli(*run, "--no-baseline", "--figures", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "series-report.html" in done.stdout
    for name in ("series-breach.png", "series-utility.png"):
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG")
    found = cli(*run, "--release", "2")
    assert found.returncode == 0 and found.stdout.strip().endswith("release-0002/report.html")
    missing = cli(*run, "--release", "9")
    assert missing.returncode == 2 and "release 9 of 'clinic' has no report" in missing.stderr


def test_categories_feed_the_categorical_measures_and_bad_ones_are_refused(tmp_path: Path) -> None:
    from serialpub.errors import InputError

    cats = {"chronic": ["hiv", "cancer"], "respiratory": ["flu", "cold", "fever"]}
    root = make_workspace(tmp_path / "ws", report={"categories": cats})
    out = Publisher(load_config(root)).publish(snapshot(root, 1))
    rep = json.loads((out.directory / "report.json").read_text(encoding="utf-8"))
    by_name = {m["name"]: m for m in rep["privacy"]}
    assert by_name["ℓ-categorical diversity"]["value"] is not None  # gastritis is in no category: Y
    assert by_name["d-density control"]["value"] is not None

    bad = make_workspace(tmp_path / "bad", report={"categories": {"chronic": ["hiv", "diabetes"]}})
    with pytest.raises(InputError, match=r"report.categories.chronic names 'diabetes'"):
        Publisher(load_config(bad))


def test_the_breach_computation_carries_the_draft_s_groups_for_the_report(series: Path) -> None:
    # the report's per-record figures take the groups the breach computation made of the same
    # draft, in both table shapes, instead of grouping the labels again
    from checks.breach import Draft, Population, PriorState, compute_breach, draft_groups

    ws = load_config(series)
    publisher = Publisher(ws)
    draft = release_files.read_release(ws.dataset_dir / release_files.release_name(2))[1]
    d = Draft(draft, publisher.qis, "disease", publisher.hierarchies)
    args = (
        d,
        Population(publisher.register.keys, publisher.register.ids.to_numpy()),
        PriorState(publisher.protected, np.ones((60, len(publisher.protected))), 2.0),
    )
    want = draft_groups(draft, d.qis, d.sensitive, d.hierarchies, publisher.protected).group_of_record
    for per_unit in (False, True):
        got = compute_breach(*args, per_unit=per_unit).group_of_record
        assert got is not None and np.array_equal(got, want)
    assert (want >= 0).all() and len(want) == len(draft)


def test_breach_table_per_unit_is_the_individual_table_compressed(series: Path) -> None:
    """The report's compressed breach table (checks.breach per_unit) holds exactly the rows of
    the validation's per-individual table, each unit standing for ``weight`` individuals who
    share every figure and the history class (equal survival products do not imply equal
    linked counts: without ``unit_classes`` a presence-mode import made the report count
    more linked pairs than a class had members)."""
    from checks.breach import Draft, Population, PriorState, compute_breach

    ws = load_config(series)
    publisher = Publisher(ws)
    history = publisher.statistics.load(publisher.store.latest_statistics("clinic"), np.full(60, 2.0))
    drafts = [release_files.read_release(ws.dataset_dir / release_files.release_name(k))[1] for k in (1, 2, 3)]
    draft = max(drafts, key=lambda d: int(d["disease"].isin(publisher.protected).sum()))  # one that links someone
    survival = history.survival[history.class_of]
    args = (
        Draft(draft, publisher.qis, "disease", publisher.hierarchies),
        Population(publisher.register.keys, publisher.register.ids.to_numpy()),
        PriorState(publisher.protected, survival, 2.0),
    )
    full = compute_breach(*args).table
    units = compute_breach(*args, per_unit=True, unit_classes=history.class_of).table
    assert len(full) > len(units) > 0 and units["weight"].sum() == len(full)
    cols = ["value", "p", "n_j", "n_s", "group", "exceeds"]
    expanded = units.loc[units.index.repeat(units["weight"]), cols].astype({"value": str})
    expected = full[cols].astype({"value": str})
    pd.testing.assert_frame_equal(
        expanded.sort_values(cols).reset_index(drop=True),
        expected.sort_values(cols).reset_index(drop=True),
        check_dtype=False,  # the expanded table narrows its integers to int32
    )
    # every individual of a unit has the representative's history class
    cls = history.class_of
    rep = units["row"].to_numpy()
    ids = publisher.register.ids
    assert list(units["individual"].astype(str)) == [str(ids[r]) for r in rep]  # the row's id
    per_ind = full.assign(cls=cls[full["individual"].cat.codes.to_numpy()])
    for (g, v), part in per_ind.groupby(["group", "value"], observed=True):
        reps = units[(units["group"] == g) & (units["value"] == v)]
        assert sorted(part["cls"].value_counts().to_dict().items()) == sorted(
            pd.Series(cls[rep[reps.index]]).repeat(reps["weight"].to_numpy()).value_counts().to_dict().items()
        )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("overrides", "without_hierarchy"),
    [
        ({"dilution": "presence"}, False),
        ({"strategy": "geometric", "alpha": 2.0}, False),
        ({"guarantee": "localized"}, False),
        ({"report": {"categories": {"chronic": ["hiv", "cancer"]}}}, True),
    ],
    ids=["presence", "geometric", "localized", "no-sensitive-hierarchy"],
)
def test_reports_in_other_configurations(tmp_path: Path, overrides: dict, without_hierarchy: bool) -> None:
    root = make_workspace(tmp_path / "ws", **overrides)
    if without_hierarchy:
        # no sensitive hierarchy: the domain comes from a flat file (protected values need one)
        (root / "hierarchies" / "disease.csv").unlink()
        (root / "domain.txt").write_text("\n".join(DISEASES) + "\n", encoding="utf-8")
        write_config(root, {**read_config(root), "sensitive_domain": "domain.txt"})
    publisher = Publisher(load_config(root))
    for t in (1, 2, 3):  # the clinic's release 3 holds no protected value
        publisher.publish(snapshot(root, t))
    reports = [_report(root, seq) for seq in (1, 2, 3)]
    assert all(r["breach_distribution"]["above_bound"] == 0 for r in reports)
    budget_expected = overrides.get("strategy", "constant") == "constant" and overrides.get("guarantee") != "localized"
    assert all((r["ratio_budget"] is not None) == budget_expected for r in reports)
    notes = " ".join(m["note"] + m["source"] for r in reports for m in r["privacy"])
    if overrides.get("dilution") == "presence":
        assert "register individuals" not in notes and "virtual dilution" not in notes
    by_name = {m["name"]: m for m in reports[1]["privacy"]}
    # no record of a value guards another: the personalized figure stays within the guarantee
    assert by_name["max personalized breach probability"]["value"] in (None, pytest.approx(0.0)) or (
        by_name["max personalized breach probability"]["value"] <= 0.5
    )


@pytest.mark.slow
def test_series_baseline_stops_at_an_imported_release(tmp_path: Path) -> None:
    from serialpub.workflow.importing import import_release

    source = make_workspace(tmp_path / "A")
    Publisher(load_config(source)).publish(snapshot(source, 1))
    target = make_workspace(tmp_path / "B")  # same seed: same register and snapshots
    ws = load_config(target)
    import_release(
        ws, load_config(source).dataset_dir / "release-0001" / "data.parquet", "0001", 2, ["hiv", "cancer"], "register"
    )
    publisher = Publisher(ws)
    publisher.publish(snapshot(target, 2))
    record = json.loads((publisher.series_report().parent / SERIES_JSON).read_text(encoding="utf-8"))
    assert record["baseline"]["max_p"] == []
    assert record["baseline"]["note"] == (
        "no release replayed: release 1 was imported (its snapshot is not a release input)"
    )
    assert [r["report"] for r in record["releases"]] == [None, "release-0002/report.html"]


@pytest.mark.parametrize("presence", [False, True])
def test_breach_from_history_classes_equals_the_dense_history(series: Path, presence: bool) -> None:
    """The validation and the report pass the statistics file's compact form (survival per
    history class + class per individual) instead of an (N, V) array, which
    grows with individuals times protected values; the verdicts and figures must not change."""
    from checks.breach import Draft, Population, PriorState, breach_table, compute_breach

    ws = load_config(series)
    publisher = Publisher(ws)
    history = publisher.statistics.load(publisher.store.latest_statistics("clinic"), np.full(60, 2.0))
    assert history.survival.shape[0] < len(history.class_of)  # the classes do compress
    drafts = [release_files.read_release(ws.dataset_dir / release_files.release_name(k))[1] for k in (1, 2, 3)]
    draft = max(drafts, key=lambda d: int(d["disease"].isin(publisher.protected).sum()))  # one that links someone
    present = np.arange(0, 60, 2) if presence else None
    d = Draft(draft, publisher.qis, "disease", publisher.hierarchies)
    population = Population(publisher.register.keys, publisher.register.ids.to_numpy(), presence, present)
    protected = publisher.protected
    dense = breach_table(d, population, PriorState(protected, history.survival[history.class_of], 2.0))
    compact = breach_table(d, population, PriorState(protected, history.survival, 2.0, history.class_of))
    assert len(dense) > 0
    key = ["individual", "value", "group"]
    pd.testing.assert_frame_equal(
        compact.sort_values(key).reset_index(drop=True), dense.sort_values(key).reset_index(drop=True)
    )
    with pytest.raises(ValueError, match=r"history_class must hold rows of PriorState.survival"):
        compute_breach(d, population, PriorState(protected, history.survival[:1], 2.0, history.class_of))
    with pytest.raises(ValueError, match=r"history_class must hold integer rows"):
        compute_breach(d, population, PriorState(protected, history.survival, 2.0, history.class_of + 0.5))
    with pytest.raises(ValueError, match=r"history_class must have shape \(60,\)"):
        compute_breach(d, population, PriorState(protected, history.survival, 2.0, history.class_of[:5]))


# -- the series report's utility plot and a refused series --------------------------------


def test_the_series_utility_plot_gives_the_register_joint_error_its_own_axis() -> None:
    """The uniform reading (up to 25 on the demo) flattened the register-joint error (0.2-0.3)
    on a shared axis; it leaves the plot when the register-joint figure is there."""
    from serialpub.report import plots

    fig = plots.series_utility([1, 2, 3], [25.0, 12.0, 20.0], [10.0, 11.0, 9.0], [0.2, 0.3, 0.25], [0.4, 0.4, 0.4])
    errors = fig.axes[0]
    shown = np.concatenate([line.get_ydata() for line in errors.get_lines()])
    assert set(shown.tolist()) == {0.2, 0.3, 0.25, 0.4}  # the joint error and its baseline, not the uniform one
    assert errors.get_ylim()[1] < 1
    old = plots.series_utility([1, 2], [25.0, 12.0], [10.0, 11.0], [None, None])  # a series from before the figure
    assert old.axes[0].get_lines()[0].get_ydata().tolist() == [25.0, 12.0]


def test_refusal_is_the_last_word_on_the_next_release() -> None:
    from serialpub.report.series import refusal

    why = "InputError: s.csv: cannot publish under ℓ = 2: x"
    refused = {"release": 3, "action": "failed", "detail": {"reason": why}}
    crashed = {"release": 3, "action": "failed", "detail": {"reason": "the process that opened it (p) has ended"}}
    drafted = {"release": 3, "action": "draft", "detail": {}}
    assert refusal([refused], 2) == {"release": 3, "reason": "cannot publish under ℓ = 2: x"}
    assert refusal([refused], 3) is None  # release 3 was published after all
    assert refusal([refused, drafted], 2) is None  # attempted again: open
    assert refusal([crashed], 2) is None and refusal([], 2) is None


@pytest.mark.slow
def test_a_refused_series_says_so_in_its_verdict(tmp_path: Path, published_workspaces: Any) -> None:
    page = refused_series(published_workspaces.copy(tmp_path / "ws", protected_values="all"))
    html = page.read_text(encoding="utf-8")
    verdict = html[html.index('<div class="verdict') : html.index("</div>", html.index('<div class="verdict'))]
    assert verdict.startswith('<div class="verdict bad"')  # red, not green
    assert "Refused: release 2 was not published." in verdict and "cannot publish under ℓ = 2" in verdict
    record = json.loads((page.parent / SERIES_JSON).read_text(encoding="utf-8"))
    assert record["refused"]["release"] == 2


def test_a_series_that_goes_on_has_a_green_verdict(series: Path) -> None:
    html = Publisher(load_config(series)).series_report(baseline=False).read_text(encoding="utf-8")
    assert '<div class="verdict" id="verdict">' in html and "Refused" not in html


@pytest.mark.slow
def test_the_report_shows_the_search_s_own_account_of_what_blocked_its_splits(
    tmp_path: Path, published_workspaces: PublishedWorkspaces, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report's ``search_levels`` are the anonymizer's own levels for the release
    (``level_report``, values by name), carried through the draft manifest, not recounted;
    they stay out of the published manifest (a draft-only key, evidence)."""
    from anonymizer.topdown import name_values
    from serialpub.workflow import anonymizing

    root = published_workspaces.copy(tmp_path / "ws", releases=1)
    seen: list[Any] = []
    anonymize = anonymizing.anonymize_history

    def kept(*args: Any, **kwargs: Any) -> Any:
        result = anonymize(*args, **kwargs)
        seen.append(result.generalization.levels)
        return result

    monkeypatch.setattr(anonymizing, "anonymize_history", kept)
    Publisher(load_config(root)).publish(snapshot(root, 2))
    folder = load_config(root).dataset_dir / release_files.release_name(2)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    levels = _report(root, 2)["search_levels"]
    assert seen and seen[-1] is not None
    assert levels == name_values(seen[-1], manifest["protected_values"])
    assert "search_levels" not in manifest
    # every region of a level split, was forced, ended at its leaves or was blocked
    assert levels[0]["regions"] == 1
    for lv in levels:
        assert lv["split"] + lv["forced"] + lv["leaf"] + lv["blocked"] == lv["regions"]
    page = (folder / "report.html").read_text(encoding="utf-8")
    start = page.index('id="search-levels-table"')
    table = page[start : page.index("</table>", start)]
    assert table.count("<tr>") == len(levels) + 1  # the header and one row per level
