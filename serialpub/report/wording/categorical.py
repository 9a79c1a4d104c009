"""Wording of the thesis's categorical controls (Hsu 2008, paper 000, §3.5; figures from
:func:`anonymizer.measures.categorical.categorical_figures`)."""

from __future__ import annotations

from anonymizer.measures.categorical import CategoricalFigures, SizeLimitExceeded
from serialpub.report.measure import Measure
from serialpub.report.wording import HSU, not_computed


def _names(ell: int) -> list[tuple[str, str, str]]:
    """(name, unit, section) of the five measures, in report order."""
    return [
        ("ℓ-categorical diversity", "categories (min set cover)", "§3.5 Defs 3.5.2–3.5.3"),
        ("d-density control", "fraction", "§3.5 Def 3.5.5"),
        ("μ-dilution", "fraction", "§3.5 Def 3.5.6"),
        (f"(c,ℓ)-categorical recursive diversity, smallest c at ℓ = {ell}", "c", "§3.5 Defs 3.5.7–3.5.8"),
        (f"(c,ℓ)-density control, smallest c at ℓ = {ell}", "c", "§3.5 Def 3.5.10 (Errata E8)"),
    ]


def categorical_measures(f: CategoricalFigures | None, *, ell: int) -> list[Measure]:
    """ℓ-categorical diversity, d-density control, μ-dilution, (c,ℓ)-categorical recursive
    diversity and (c,ℓ)-density control, in this order.

    Args:
        f: the release's figures; None when no sensitive categories are configured (every
            measure is then listed as not computed).
        ell: ℓ of the (c,ℓ) measures (named even when not computed).

    A figure stopped by a size limit is listed as not computed with the limit's message.
    """
    names = _names(ell)
    if f is None:
        return [
            not_computed(n, u, f"{HSU} {s}", "not computed: no sensitive categories configured") for n, u, s in names
        ]
    (n0, u0, s0), (n1, u1, s1), (n2, u2, s2), (n3, u3, s3), (n4, u4, s4) = names
    out: list[Measure] = []
    if isinstance(f.min_cover, SizeLimitExceeded):
        out.append(not_computed(n0, u0, f"{HSU} {s0}", f"not computed: {f.min_cover}"))
    else:
        out.append(
            Measure(
                n0,
                float(f.min_cover),
                u0,
                f"{HSU} {s0}",
                "fewest sets of {Y} ∪ S̄ needed to cover a group's distinct values (exact); "
                "ℓ-categorically diverse for ℓ ≤ value",
            )
        )
    out += [
        Measure(
            n1,
            f.max_density,
            u1,
            f"{HSU} {s1}",
            "max over groups and over τ ∈ S̄ ∪ {Y} of the group's fraction in τ; d-density controlled for d ≥ value",
        ),
        Measure(
            n2,
            f.min_dont_care,
            u2,
            f"{HSU} {s2}",
            "min over groups of the fraction of records in the don't-care set Y; μ-diluted for μ ≤ value",
        ),
    ]
    if isinstance(f.recursive_c, SizeLimitExceeded):
        out.append(not_computed(n3, u3, f"{HSU} {s3}", f"not computed: {f.recursive_c}"))
    else:
        out.append(
            Measure(
                n3,
                f.recursive_c,
                u3,
                f"{HSU} {s3}",
                f"max over groups of r/(1 − MC(ℓ)), MC by exact maximum coverage; satisfied for c ≥ value; "
                f"with c = {f.c}: {f.recursive_failing:,} of {f.n_groups:,} groups fail",
            )
        )
    out.append(
        Measure(
            n4,
            f.density_c,
            u4,
            f"{HSU} {s4}",
            f"max over groups of D_1/Σ_(i≥ℓ) D_i over the categories a group meets (sum from i = ℓ, "
            f"Errata E8); satisfied for c ≥ value; with c = {f.c}: {f.density_failing:,} groups fail",
        )
    )
    return out
