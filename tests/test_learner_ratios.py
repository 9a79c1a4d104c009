"""The realized within-group propensity ratio of the learner report
(anonymizer.learners.ratios; docs/threat-model.md, "The propensity ratio") against a
per-group re-implementation on the random tiny published series of tests/test_audit.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_audit import BF_H, _random_case, write_workspace
from test_audit_learners import QIS, Brute

from serialpub.analysis.audit import audit_workspace
from serialpub.analysis.audit.learner_report import LearnerFigures, LearnerReport, format_learners


def brute_ratios(brute: Brute) -> dict[str, float]:
    """Per protected value: the largest max π / mean π over the candidates of any group,
    of any release, that holds the value (mean over |reg(G)|, or the records if more), π
    the one-pass naive Bayes learner's."""
    pi = brute.nb(brute.rows(brute.uniform()))
    out = dict.fromkeys(brute.values, 0.0)
    for groups in brute.groups:
        for members, counts, n in groups:
            for s in brute.values:
                props = [pi[tuple(o[q] for q in QIS)][s] for o in members]
                if counts.get(s, 0) > 0 and props and sum(props) > 0:
                    out[s] = max(out[s], max(props) / (sum(props) / n))
    return out


@pytest.mark.parametrize("seed", range(8))
def test_the_realized_ratio_equals_the_per_group_definition(tmp_path: Path, seed: int) -> None:
    register, releases = _random_case(seed)
    ws = write_workspace(tmp_path / "ws", register, BF_H, releases)
    report = audit_workspace(ws, learners=("nb",)).learners
    assert report is not None
    brute = Brute([register] * len(releases), releases)
    expected = brute_ratios(brute)
    nb = next(f for f in report.learners if f.name == "nb")
    assert report.values == brute.values
    assert nb.ratios == pytest.approx([expected[v] for v in brute.values], abs=1e-9)
    # ρ = 1 in every release: a learner lies inside the covered class only where it is flat
    assert report.declared == [1] * len(brute.values)
    assert nb.covered == [r <= 1 for r in nb.ratios]
    if seed in (0, 1):  # cases where the learner is sharper than the uniform charge: the check can fail
        assert any(r > 1 + 1e-9 for r in nb.ratios) and not all(nb.covered)
    posterior = brute.learner("nb")
    assert nb.max_per_value == pytest.approx(
        [max(x for (_, s), x in posterior.items() if s == v) for v in brute.values], abs=1e-9
    )
    text = format_learners(report)
    assert "realized within-group ratio max π / mean π" in text
    assert f"{nb.max_per_value[0]:.3f} / {nb.ratios[0]:.2f}" in text


def test_the_per_value_table_has_a_row_per_value_and_fits_the_console_with_every_value_protected() -> None:
    # the Adult demo protects 14 occupations: a column per value ran past any console
    values = [f"occupation-{k:02d}-with-a-long-name" for k in range(14)]
    learners = [
        LearnerFigures(name, 0.5, None, None, 0.25, 0, None, [], 1.0, None, [10.0 + k for k in range(14)],
                       [k % 2 == 0 for k in range(14)], [0.1 * (k % 10) for k in range(14)])
        for name in ("nb", "nb-em3", "nb-em10", "logistic-pairs")
    ]  # fmt: skip
    report = LearnerReport(ell=2.0, pairs=99_999_999, values=values, declared=[3] * 14, learners=learners)
    lines = format_learners(report).splitlines()
    assert all(len(line) <= 120 for line in lines if not line.startswith("note:"))
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["value", "ρ_s"])
    rows = lines[header + 1 : header + 15]
    assert [r.split()[0] for r in rows] == values
    # each value's row carries its own figures, in the learners' order
    assert rows[3].split()[1:] == ["3", *(["0.300", "/", "13.00", ">"] * 4)]
    assert rows[4].split()[1:] == ["3", *(["0.400", "/", "14.00", "≤"] * 4)]
