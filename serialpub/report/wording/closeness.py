"""Wording of t-closeness (Hsu 2008, paper 000, §3.4; Li, Li & Venkatasubramanian, ICDE 2007;
figures from :func:`anonymizer.measures.closeness.closeness_figures`)."""

from __future__ import annotations

from anonymizer.measures.closeness import ClosenessFigures
from serialpub.report.measure import Measure
from serialpub.report.wording import HSU, not_computed

LI = "Li, Li & Venkatasubramanian, ICDE 2007 (thesis ref. [7])"


def closeness_measures(f: ClosenessFigures) -> list[Measure]:
    """t-closeness with the equal, then the hierarchical ground distance (max EMD over groups)."""
    src_h = f"{LI} §4.2 hierarchical distance; {HSU} §3.4 Def 3.4.3"
    name_h = "t-closeness (hierarchical ground distance)"
    if f.emd_hierarchical is None:
        hier = not_computed(name_h, "EMD", src_h, "no sensitive-attribute hierarchy given")
    else:
        hier = Measure(
            name_h,
            f.emd_hierarchical,
            "EMD",
            src_h,
            f"max over groups; d(i,j) = level of the lowest common ancestor / H, H = "
            f"{f.hierarchy_height}; t-close for t ≥ value",
        )
    equal = Measure(
        "t-closeness (equal ground distance)",
        f.emd_equal,
        "EMD",
        f"{HSU} §3.4 Def 3.4.3; {LI} §4.2",
        "max over groups of the EMD to the release's distribution with d = 1 between distinct values "
        "(= total variation); t-close for t ≥ value",
    )
    return [equal, hier]
