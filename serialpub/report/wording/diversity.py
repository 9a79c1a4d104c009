"""Wording of k-anonymity and ℓ-diversity (Hsu 2008, paper 000, §3.2–3.3; figures from
:func:`anonymizer.measures.diversity.diversity_figures`)."""

from __future__ import annotations

from anonymizer.measures.diversity import DiversityFigures
from serialpub.report.measure import Measure
from serialpub.report.wording import HSU, not_computed


def diversity_measures(f: DiversityFigures, *, presence: bool = False) -> list[Measure]:
    """k-anonymity (records), k-anonymity over candidates (individuals), distinct ℓ-diversity,
    entropy ℓ-diversity (2^H_min), recursive (c,ℓ)-diversity's smallest c at ℓ and largest ℓ at
    c, in this order.

    Args:
        f: the release's figures.
        presence: presence dilution (n_j counts the group's records, not register candidates).
    """
    g = f.n_groups
    out = [
        Measure(
            "k-anonymity",
            float(f.k),
            "records",
            f"{HSU} §3.2 Def 3.2.1",
            f"smallest of {g:,} QI-groups ({f.n_records:,} records); the release is k-anonymous for k ≤ {f.k}. "
            "Under the global guarantee a small group is not a risk by itself: each individual is protected by the "
            "group's candidates in the register (k-anonymity over candidates) and the bound 1/ℓ over all releases",
        )
    ]
    if presence:
        src_cand = f"{HSU} §3.2 Def 3.2.1 over n_j = the group's records (presence dilution)"
        cand_note = "smallest n_j; under presence dilution n_j is the group's record count, so this equals k-anonymity"
    else:
        src_cand = f"{HSU} §3.2 Def 3.2.1 over register candidates n_j (paper 004, virtual dilution)"
        cand_note = "smallest number of register individuals whose QIs fall in a group's region"
    if f.min_candidates is None:
        out.append(not_computed("k-anonymity over candidates", "individuals", src_cand, "no candidate counts given"))
    else:
        out.append(Measure("k-anonymity over candidates", float(f.min_candidates), "individuals", src_cand, cand_note))
    rel = "<" if f.strict else "≤"
    out += [
        Measure(
            "distinct ℓ-diversity",
            float(f.min_distinct),
            "ℓ (distinct values)",
            f"{HSU} §3.3 Def 3.3.1",
            f"fewest distinct sensitive values in a group; {f.homogeneous_groups:,} of {g:,} groups are homogeneous. "
            "A value 1 is allowed under the global guarantee: the records of a group are diluted among its "
            "register candidates, and the breach probability of every individual stays at most 1/ℓ over all releases",
        ),
        Measure(
            "entropy ℓ-diversity",
            f.entropy_ell,
            "ℓ (= 2^H_min)",
            f"{HSU} §3.3 Def 3.3.2",
            f"smallest group entropy H_min = {f.min_entropy_bits:.6g} bits (log base 2); entropy ℓ-diverse for "
            f"ℓ ≤ 2^H_min; the whole release has H = {f.release_entropy_bits:.6g} bits (the feasibility bound)",
        ),
        Measure(
            f"recursive (c,ℓ)-diversity, smallest c at ℓ = {f.ell}",
            f.recursive_c,
            "c",
            f"{HSU} §3.3 Def 3.3.3 (Errata E5, E6)",
            f"max over groups of r1/(r_ℓ+…+r_m); satisfied for c > value (strict <) or c ≥ value (≤ reading); "
            f"with c = {f.c} and r1 {rel} c·Σ: {f.recursive_failing:,} of {g:,} groups fail",
        ),
        Measure(
            f"recursive (c,ℓ)-diversity, largest ℓ at c = {f.c}",
            float(f.recursive_max_ell),
            "ℓ",
            f"{HSU} §3.3 Def 3.3.3 (Errata E5, E6)",
            f"min over groups of the largest ℓ with r1 {rel} c·(r_ℓ+…+r_m); ℓ = 1 is always satisfied",
        ),
    ]
    return out
