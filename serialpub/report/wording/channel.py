"""Wording of Askari et al.'s information-theoretic privacy and utility (paper 003; figures from
:func:`anonymizer.measures.kanonymity_channel.channel_figures`)."""

from __future__ import annotations

from dataclasses import replace

from anonymizer.measures.kanonymity_channel import MAX_INPUT_TABLES, ChannelFigures
from serialpub.report.measure import Measure
from serialpub.report.wording import not_computed

SOURCE = "Askari, Safavi-Naini & Barker 2012 (paper 003)"


def channel_measures(f: ChannelFigures, *, suppressed: int | None = None) -> list[Measure]:
    """The MAP error of the k-anonymity channel (Bayes risk; not computed, with the reason, when
    k is missing or too large or the channel too big to enumerate), the factorized per-cell MAP
    error and table uncertainty, Utility_T, Utility_T' and the degradation, in this order.

    Args:
        f: the release's figures.
        suppressed: records left out of the figures (suppressed); when given, every note says
            that the figures see only the ``f.records`` published records.
    """
    bayes_name, bayes_src = "MAP error of the mechanism (Bayes risk)", f"{SOURCE} §4.1 eq 3/5 (corrected), §5"
    out: list[Measure] = []
    if f.k is None:
        out.append(not_computed(bayes_name, "probability", bayes_src, "k not given: the §5 channel needs it"))
    elif f.k > f.records:
        out.append(not_computed(bayes_name, "probability", bayes_src, f"k = {f.k} exceeds the {f.records} records"))
    elif f.bayes_risk is None:
        out.append(
            not_computed(
                bayes_name,
                "probability",
                bayes_src,
                f"the channel has C(Π|A_i| + r − 1, r) ≈ 10^{f.log10_input_tables:.0f} possible input tables "
                f"(eq 21); exact computation is limited to {MAX_INPUT_TABLES} input tables",
            )
        )
    else:
        out.append(
            Measure(
                name=bayes_name,
                value=f.bayes_risk,
                unit="probability",
                source=bayes_src,
                note=f"§5 model mechanism (global full-domain generalization, k = {f.k}, ℙ(T'|T) = 1/x), not "
                f"necessarily the pipeline's algorithm; uniform prior over {f.input_tables} input tables, "
                f"{f.output_tables} outputs; higher is more private",
            )
        )
    fp = f.factorized
    cond = "exact for a uniform independent cell prior and a data-independent generalization (docs/reports.md D6)"
    out.append(
        Measure(
            name="per-cell MAP error (factorized)",
            value=fp.mean_cell_error,
            unit="probability",
            source=f"{SOURCE} §3.2, §4.1 eq 5, per cell [DERIVED]",
            note=f"mean of 1 − 1/n_cell over {fp.cells} QI cells; {cond}",
        )
    )
    out.append(
        Measure(
            name="table-guess uncertainty (factorized)",
            value=fp.log2_preimages,
            unit="bits",
            source=f"{SOURCE} §3.2 strong adversary, eq 5 [DERIVED]",
            note=f"log₂ of the preimages of T'; whole-table MAP error 1 − 2^−bits = {fp.table_error:.6g}; {cond}",
        )
    )
    dom = (
        "H_max = log₂ of the leaf domain for both tables, a generalized cell read as uniform over its "
        "leaves; entropies of empirical frequencies, bits"
    )
    out += [
        Measure("utility of the original table", f.utility_original, "bits", f"{SOURCE} §4.2 eq 13–14", dom, "utility"),
        Measure(
            "utility of the published table", f.utility_published, "bits", f"{SOURCE} §4.2 eq 13–14", dom, "utility"
        ),
        Measure(
            "utility degradation",
            f.utility_degradation,
            "bits",
            f"{SOURCE} §4.2 eq 15",
            "Utility_T − Utility_T' (lower is better); " + dom,
            "utility",
        ),
    ]
    if suppressed is None:
        return out
    # unlike the thesis's utility measures, these see only what is published
    scope = f"computed on the {f.records:,} published records (the {suppressed:,} suppressed ones left out)"
    return [replace(m, note=f"{m.note}; {scope}" if m.note else scope) for m in out]
