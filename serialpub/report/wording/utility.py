"""Wording of a draft's utility figures: the query error (Xiao & Tao 2006, paper 001 §5.2,
docs/design.md section 8) and the information-loss measures (figures from
:func:`anonymizer.measures.utility.utility_figures`)."""

from __future__ import annotations

from collections.abc import Mapping

from anonymizer.measures.utility import UtilityFigures
from serialpub.report.measure import Measure
from serialpub.report.wording import not_computed

FAMILY = "utility"

DESIGN_8 = "Xiao & Tao 2006 (paper 001) §5.2, as docs/design.md section 8"
SRC_DM = "Bayardo & Agrawal 2005 (ICDE; not in papers/), discernibility metric C_DM"
SRC_CAVG = "LeFevre, DeWitt & Ramakrishnan 2006 (ICDE; not in papers/), C_AVG"
SRC_NCP = "Xu et al. 2006 (KDD; not in papers/), normalized certainty penalty"
SRC_REDACT = "Hsu 2008 (paper 000) §4.1, redaction counting (after Meyerson & Williams)"
SRC_TREE = "Hsu 2008 (paper 000) §4.1, tree measure r/l (after Aggarwal et al.)"
SRC_PI_E = "Hsu 2008 (paper 000) §4.2 Def 4.2.1, entropy measure Π_e"
SRC_PI_ME = "Hsu 2008 (paper 000) §4.2 Def 4.2.4, monotone entropy measure Π_me"
SRC_PI_NE = "Hsu 2008 (paper 000) §4.2 Def 4.2.6, non-uniform entropy measure Π_ne"
SRC_PI_TV = "Hsu 2008 (paper 000) §4.4 Defs 4.4.1-4.4.2, tuple-wise variance loss Π_tv"
SRC_SUPPRESSION = "serialpub release model: a suppressed record is left out of the release"

_TV_UNIT = "Σ EMD over records (0/1 distance)"


#: the names of the query-error measures, as report.json lists them; the register-joint
#: one is the primary utility figure, the uniform one paper 001's
QUERY_ERROR = "average relative error of range-count queries"
WEIGHTED_ERROR = "average relative error of range-count queries, register-weighted"
JOINT_ERROR = "average relative error of range-count queries, register-joint"
BASELINE_ERROR = "average relative error of range-count queries, histogram-only baseline"
GAIN = "gain over the histogram-only baseline"
SRC_JOINT = "docs/data-users.md (register-joint estimator, anonymizer.joint)"


def joint_query_error_measures(
    mean: float | None, baseline: float | None, settings: Mapping[str, object]
) -> list[Measure]:
    """The primary utility figure and its yardstick: the same queries answered by the
    register-joint estimator on the release, on a release of the snapshot's sensitive
    histogram alone (one group, every QI '*'), and the gain (baseline − release), each a
    fraction (None: not computed)."""
    note = "{queries} queries, qd = {qd}, selectivity {selectivity}, seed {seed}".format(**settings)
    gain = None if mean is None or baseline is None else baseline - mean
    return [
        Measure(
            JOINT_ERROR, mean, "fraction", SRC_JOINT,
            "primary utility figure: each group's published counts spread over the register individuals of its "
            f"region, as a data user with the public copy computes them; {note}",
            family=FAMILY,
        ),
        Measure(
            BASELINE_ERROR, baseline, "fraction", SRC_JOINT,
            f"the same estimator on a release of the snapshot's sensitive histogram alone (one group, every QI '*'); "
            f"{note}",
            family=FAMILY,
        ),
        Measure(
            GAIN, gain, "fraction", SRC_JOINT,
            "baseline minus release: how much closer this release brings a data user's answers than the "
            "sensitive histogram alone; near 0, the release tells little beyond the histogram",
            family=FAMILY,
        ),
    ]  # fmt: skip


def query_error_measure(mean: float | None, settings: Mapping[str, object]) -> Measure:
    """The average relative error of range-count queries under paper 001's uniform
    estimator (a fraction; None: not computed).

    Args:
        mean: the mean relative error, or None when the draft cannot be read by the measure.
        settings: ``queries``, ``qd``, ``selectivity`` and ``seed``, stated in the note.
    """
    return Measure(
        QUERY_ERROR,
        mean,
        "fraction",
        DESIGN_8,
        "paper 001's estimator: a generalized value spread uniformly over its leaves; "
        "{queries} queries, qd = {qd}, selectivity {selectivity}, seed {seed}".format(**settings),
        family=FAMILY,
    )


def weighted_query_error_measure(mean: float | None, settings: Mapping[str, object]) -> Measure:
    """The same queries' average relative error when a generalized value is spread over its
    leaves by the register's count of each leaf (the manifest's ``register_marginals``)
    instead of uniformly (a fraction; None: not computed)."""
    return Measure(
        WEIGHTED_ERROR,
        mean,
        "fraction",
        "docs/design.md section 8 (register-weighted estimator)",
        "the same queries; a generalized value spread over its leaves in proportion to the register's "
        "individuals per leaf, which the manifest publishes as register_marginals; {queries} queries, qd = {qd}, "
        "selectivity {selectivity}, seed {seed}".format(**settings),
        family=FAMILY,
    )


def _m(name: str, value: float, unit: str, source: str, note: str) -> Measure:
    return Measure(name, value, unit, source, note, family=FAMILY)


def information_loss_measures(f: UtilityFigures) -> list[Measure]:
    """Suppression rate, discernibility C_DM, average QI-group size, C_AVG, NCP, redactions, tree
    measure, Π_e, Π_me, Π_ne, Π_tv, in this order (family ``"utility"``). A figure that is
    undefined (nothing published, an empty snapshot, no sensitive values) is listed as not
    computed with the reason.
    """
    n, d = f.records, f.qis
    out = [
        _m(
            "suppression rate",
            f.suppression_rate,
            "fraction of snapshot records",
            SRC_SUPPRESSION,
            f"{f.suppressed:,} of {n:,} records suppressed",
        ),
        _m(
            "discernibility metric C_DM",
            float(f.discernibility),
            "records²",
            SRC_DM,
            f"Σ |QI-group|² plus |D| = {n:,} per suppressed record; lowest possible {n:,}, highest {n * n:,}",
        ),
    ]
    cavg_unit = "ratio (1 = every group of size k)"
    if f.average_group_size is not None and f.normalized_average_group_size is not None:
        k_note = f"k = {f.k:g}" + ("" if f.k_given else " (the smallest QI-group: the k the release achieves)")
        out += [
            _m(
                "average QI-group size",
                f.average_group_size,
                "records",
                SRC_CAVG,
                f"{f.published:,} published records in {f.groups:,} QI-groups",
            ),
            _m("normalized average QI-group size C_AVG", f.normalized_average_group_size, cavg_unit, SRC_CAVG, k_note),
        ]
    else:
        reason = "nothing published: no QI-groups"
        out += [
            not_computed("average QI-group size", "records", SRC_CAVG, reason, family=FAMILY),
            not_computed("normalized average QI-group size C_AVG", cavg_unit, SRC_CAVG, reason, FAMILY),
        ]
    if n == 0 or f.ncp is None or f.loss is None:
        reason = "empty snapshot"
        names = [
            ("normalized certainty penalty NCP", "fraction", SRC_NCP),
            ("redactions", "cells", SRC_REDACT),
            ("tree measure", "cells", SRC_TREE),
            ("entropy measure Π_e", "bits", SRC_PI_E),
            ("monotone entropy measure Π_me", "bits", SRC_PI_ME),
            ("non-uniform entropy measure Π_ne", "bits", SRC_PI_NE),
            ("tuple-wise variance loss Π_tv", _TV_UNIT, SRC_PI_TV),
        ]
        return out + [not_computed(a, b, c, reason, family=FAMILY) for a, b, c in names]

    loss = f.loss
    cells = loss.cells
    sup_note = "suppressed records count as all-'*' tuples"
    out += [
        _m(
            "normalized certainty penalty NCP",
            f.ncp,
            "fraction",
            SRC_NCP,
            f"mean over {n:,} snapshot records of the mean over {d} QIs (equal weights); 0 = as collected, "
            "1 = all suppressed; numeric QIs by interval width over the hierarchy's domain; suppressed records count 1",
        ),
        _m(
            "redactions",
            float(loss.redactions.sum()),
            "cells",
            SRC_REDACT,
            f"QI cells published as '*': {loss.redactions.sum() / cells:.2%} of {cells:,}; {sup_note}",
        ),
        _m(
            "tree measure",
            float(loss.tree.sum()),
            "cells (Σ r/l)",
            SRC_TREE,
            f"mean {loss.tree.sum() / cells:.4f} per QI cell (0 = leaf, 1 = '*'); {sup_note}",
        ),
    ]
    for name, values, src, extra in (
        ("entropy measure Π_e", loss.entropy, SRC_PI_E, "; not monotone (Lemma 4.2.3)"),
        ("monotone entropy measure Π_me", loss.monotone_entropy, SRC_PI_ME, ""),
        ("non-uniform entropy measure Π_ne", loss.non_uniform_entropy, SRC_PI_NE, ""),
    ):
        out.append(
            _m(
                name,
                float(values.sum()),
                "bits",
                src,
                f"mean {values.sum() / n:.4f} bits per record; log₂, snapshot frequencies; {sup_note}{extra}",
            )
        )
    tv = f.tuple_variance
    if tv is None:
        out.append(
            not_computed("tuple-wise variance loss Π_tv", _TV_UNIT, SRC_PI_TV, "no sensitive values given", FAMILY)
        )
    else:
        out.append(
            _m(
                "tuple-wise variance loss Π_tv",
                tv.loss,
                _TV_UNIT,
                SRC_PI_TV,
                f"Var_T(QI) = {tv.original:,.2f} before, Var_T*(QI*) = {tv.release:,.2f} after; all QIs; "
                "negative when the release splits original QI-blocks; suppressed records in one all-'*' block",
            )
        )
    return out
