"""Wording of Malik's disclosure risk of a release (paper 002; figures from
:func:`anonymizer.measures.reidentification.release_disclosure`)."""

from __future__ import annotations

from anonymizer.measures.reidentification import ReleaseDisclosure
from serialpub.report.measure import Measure

SOURCE = "Malik 2014 (paper 002)"


def disclosure_measures(rd: ReleaseDisclosure, *, diluted: bool, presence: bool = False) -> list[Measure]:
    """Expected re-identifications Ψ (= ε = 𝓗 under the flat block model), the re-identification
    rate Ψ/R, the heuristic 𝓗, the largest per-record re-identification probability, the degree
    of anonymity d, and the [DERIVED] expected sensitive-value cracks and their rate, in this
    order. Every figure is exact at any release size, so nothing is left not computed; the
    notes state the model's assumptions.

    Args:
        rd: the release's figures.
        diluted: whether candidate counts n_j were given (else n_j = r_j, Malik's bijection).
        presence: presence dilution (the candidates are the present individuals, n_j = r_j).
    """
    if not diluted:
        blocks = "records (n_j = r_j, Malik's bijection)"
    elif presence:
        blocks = "n_j = r_j records (presence dilution: the candidates are the present individuals)"
    else:
        blocks = "n_j candidates (virtual dilution; matches to non-released candidates are no cracks)"
    model = (
        "flat QI-linkage attack: each QI-group is a complete block between its records and its "
        + blocks
        + "; attacker knows exact QIs, no sensitive values"
    )
    return [
        Measure(
            name="expected re-identifications Ψ",
            value=rd.expected_reidentifications,
            unit="records",
            source=f"{SOURCE} §4.1 eq 4.2, Thm 4.1.1 (Ψ = ε); per-class blocks, docs/reports.md D3",
            note=f"Σ_j r_j/n_j over {rd.groups_with_records} QI-groups; lower is safer; {model}",
        ),
        Measure(
            name="re-identification rate Ψ/R",
            value=rd.reidentification_rate,
            unit="fraction",
            source=f"{SOURCE} §4.1 eq 4.2",
            note=f"expected cracks per published record (R = {rd.published}); ≈ 1/mean class size without dilution",
        ),
        Measure(
            name="heuristic 𝓗",
            value=rd.expected_reidentifications,
            unit="records",
            source=f"{SOURCE} §4.3 eq 4.3",
            note="Σ_i P[i, m_i] with P[i, m_i] = 1/n_j; equals Ψ here (uniform blocks: NMAPE = 0, §4.4)",
        ),
        Measure(
            name="max per-record re-identification probability",
            value=rd.max_reidentification_probability,
            unit="probability",
            source=f"{SOURCE} §3.2 (edge marginal of the induced matching distribution)",
            note="1/min_j n_j over non-empty QI-groups: chance the attacker's matching names a record's individual",
        ),
        Measure(
            name="degree of anonymity d",
            value=rd.degree_of_anonymity,
            unit="fraction",
            source=f"{SOURCE} §2.5 eq 2.2 (Edman et al.)",
            note="log|𝓜(G)|/log|𝓜(K)|, matchings = injections of records into candidates; higher is safer",
        ),
        Measure(
            name="expected sensitive-value cracks",
            value=rd.expected_value_cracks,
            unit="records",
            source=f"{SOURCE} §4.1 eq 4.2 with the crack relation widened to equal sensitive values [DERIVED]",
            note="Σ_j Σ_s c_js²/n_j: individuals matched to a record carrying their own sensitive value",
        ),
        Measure(
            name="sensitive-value crack rate",
            value=rd.value_crack_rate,
            unit="fraction",
            source=f"{SOURCE} §4.1 eq 4.2 [DERIVED]",
            note="expected sensitive-value cracks per published record",
        ),
    ]
