"""Wording of Xiao & Tao's personalized breach probability (paper 001, §2 and §3.2; figures from
:func:`anonymizer.measures.personalized.summarize`)."""

from __future__ import annotations

from anonymizer.measures.personalized import TIE_TOLERANCE, BreachSummary
from serialpub.report.measure import Measure
from serialpub.report.wording import not_computed

SOURCE = "Xiao & Tao 2006 (paper 001)"


def personalized_measures(s: BreachSummary, *, primary: bool, presence: bool = False) -> list[Measure]:
    """Maximum P_breach (fraction), records with P_breach > p_breach (records), mean P_breach
    over all records (fraction), in this order; max and mean are not computed for a release
    without records.

    Args:
        s: the release's figures.
        primary: Primary Case (at most one record per individual: Theorem 1) or Non-primary
            Case (Theorem 2), as the figures were computed.
        presence: presence dilution (n_j counts the group's present records).
    """
    theorem = "Theorem 1 (Primary Case)" if primary else "Theorem 2 (Non-primary Case)"
    source = f"{SOURCE} §3.2 {theorem}"
    case = "at most one record per individual" if primary else "individuals may own several records"
    if presence:
        region = "the group's present records under presence dilution, S_ext"
    else:
        region = "register individuals in the group's region, S_ext"
    setting = (
        f"{case}; n = candidates n_j ({region}); "
        f"{s.guarded} of {s.records} records have a guarding node (the others need no protection, P = 0)"
    )
    name_max = "max personalized breach probability"
    name_mean = "mean personalized breach probability"
    if s.records == 0:
        reason = "the release has no records"
        max_m = not_computed(name_max, "fraction", source, reason)
        mean_m = not_computed(name_mean, "fraction", source, reason)
    else:
        max_m = Measure(name_max, s.max_p, "fraction", source, f"largest P_breach(t) over records; {setting}")
        mean_m = Measure(name_mean, s.mean_p, "fraction", source, f"mean P_breach(t) over all records; {setting}")
    above_m = Measure(
        "records above p_breach",
        float(s.above),
        "records",
        f"{SOURCE} §2 (requirement P_breach(t) ≤ p_breach, after Def 3); {theorem}",
        f"records with P_breach(t) > p_breach = {s.p_breach:g} (by more than {TIE_TOLERANCE:g}); {setting}",
    )
    return [max_m, above_m, mean_m]
