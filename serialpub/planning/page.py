"""The plan's readable outputs: the ranking, the advice drawn from the figures, the
frontier plot and the HTML page in the report style (one self-contained file: inline CSS
and SVG, no scripts)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from serialpub import __version__
from serialpub.planning.series import NEAR_BOUND
from serialpub.report import plots
from serialpub.report.render import environment

TEMPLATE = "plan.html.j2"


def ranked(rows: Sequence[dict[str, Any]], rounds: int) -> list[dict[str, Any]]:
    """The candidates by usefulness, with their flags (:data:`~serialpub.planning.series.FLAGS`)
    deciding before the gain, so that a flagged candidate is never silently first: those that
    publish all ``rounds`` releases without a flag, by gain (largest first); then those that
    last but are flagged (near the bound, a release of 1 group, a known breach), by gain; then
    the others by releases published and gain."""

    def key(r: dict[str, Any]) -> tuple[int, int, float]:
        lasted = r["published"] >= rounds
        tier = 0 if lasted and not r["flags"] else 1 if lasted else 2
        return (tier, -r["published"], -(r["gain"] if r["gain"] is not None else float("-inf")))

    return sorted(rows, key=key)


def _spans(releases: Sequence[int]) -> str:
    """Release numbers as runs: ``6-7, 9``."""
    runs: list[list[int]] = []
    for n in releases:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def flag_texts(r: dict[str, Any]) -> list[str]:
    """The candidate's flags (its ``flags``) as the page and the command line word them."""
    words = {
        "refused": lambda: f"refused at release {r['refused_at']}",
        "collapsed": lambda: (
            f"1 group in release{'s' if len(r['collapsed_releases']) > 1 else ''} {_spans(r['collapsed_releases'])}"
        ),
        "near_bound": lambda: f"max p {r['max_breach']:.4f} within {1 - NEAR_BOUND:.0%} of 1/ℓ = {r['bound']:.4f}",
        "learner_near_bound": lambda: _learned_text(r),
        "known_breach": lambda: "known breach",
    }
    return [words[f]() for f in r["flags"]]


def _learned_text(r: dict[str, Any]) -> str:
    """The learner flag's words: the strongest learner, its largest P', above 1/ℓ or near it."""
    top = max(r["learners"], key=lambda x: x["max_p"])
    where = "above" if top["max_p"] > r["bound"] else f"within {1 - NEAR_BOUND:.0%} of"
    return f"learner {top['name']}: P' {top['max_p']:.4f} {where} 1/ℓ = {r['bound']:.4f}"


def protected_setting(r: dict[str, Any]) -> str:
    """The candidate's protected values as ``serialpub.yaml`` spells them: ``rarest:m`` and
    a list resolved to the values themselves (JSON strings are YAML flow scalars)."""
    if r["settings"]["protected_values"] == "all":
        return f"protected_values: all  # the {len(r['protected'])} values"
    return "protected_values: [" + ", ".join(json.dumps(v, ensure_ascii=False) for v in r["protected"]) + "]"


def sparkline(groups: Sequence[int], collapsed: Sequence[int], width: int = 96, height: int = 20) -> str:
    """Groups per release as a small inline SVG line (release 1 at the left, 0 groups at
    the bottom), a red dot on every release of 1 group; empty for no release."""
    if not groups:
        return ""
    top = max(max(groups), 1)
    step = (width - 4) / max(len(groups) - 1, 1)
    pts = [(2 + i * step, height - 2 - (height - 4) * g / top) for i, g in enumerate(groups)]
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
    dots = "".join(
        f'<circle cx="{pts[n - 1][0]:.1f}" cy="{pts[n - 1][1]:.1f}" r="2.2" fill="{plots.BOUND_COLOR}"/>'
        for n in collapsed
    )
    if len(pts) == 1 and not collapsed:  # one release: a line of one point draws nothing
        dots = f'<circle cx="{pts[0][0]:.1f}" cy="{pts[0][1]:.1f}" r="2" fill="{plots.GLOBAL_COLOR}"/>'

    return (
        f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">'
        f"<title>groups per release: {' '.join(map(str, groups))}</title>"
        f'<polyline points="{line}" fill="none" stroke="{plots.GLOBAL_COLOR}" stroke-width="1.3"/>{dots}</svg>'
    )


def _protection(r: dict[str, Any], domain_size: int) -> str:
    spec = r["settings"]["protected_values"]
    n = len(r["protected"])
    if spec == "all":
        return f"protecting all {n} values"
    if isinstance(spec, str):
        return f"protecting the {n} rarest value{'s' if n != 1 else ''}"
    return f"protecting {n} listed value{'s' if n != 1 else ''} of {domain_size}"


def advice(rows: Sequence[dict[str, Any]], rounds: int, domain_size: int) -> list[str]:
    """Sentences stating the trade-offs observed in ``rows`` (:func:`ranked`'s input), each
    computed from the figures: the best candidate that lasts, the candidates whose releases
    say little beyond the sensitive histogram, the effect of the protected set on the groups,
    the candidates refused early, and the leaking partition model's price."""
    out: list[str] = []
    lasting = [r for r in rows if r["published"] >= rounds]
    sound = [r for r in lasting if not r["known_breach"]]
    clear = [r for r in sound if not r["flags"]]
    if clear:
        best = max(clear, key=lambda r: r["gain"])
        out.append(
            f"Of the candidates without a flag that last all {rounds} releases, {best['candidate']} is the "
            f"most useful: mean query error {best['error']:.3f} against {best['baseline']:.3f} for the histogram "
            f"alone (gain {best['gain']:.3f}), {best['groups_mean']:,.0f} groups a release, largest breach "
            f"probability {best['max_breach']:.4f} (bound {best['bound']:.4f})."
        )
    elif rows:
        out.append(f"No candidate without a flag publishes all {rounds} releases; see the flags and refusals below.")
    top = max((r["gain"] for r in clear), default=float("-inf"))
    above = [r for r in sound if r["flags"] and r["gain"] > top]
    if above:
        out.append(
            "Ranked below the candidates without a flag, though they gain more: "
            + "; ".join(f"{r['candidate']} (gain {r['gain']:.3f}; {', '.join(flag_texts(r))})" for r in above)
            + "."
        )
    if lasting:
        best_gain = max(r["gain"] for r in (sound or lasting))
        weak = [r for r in lasting if r["gain"] < 0.25 * best_gain and best_gain > 0]
        by_protection: dict[str, list[dict[str, Any]]] = {}
        for r in weak:
            by_protection.setdefault(_protection(r, domain_size), []).append(r)
        for text, group in by_protection.items():
            gmax = max(r["gain"] for r in group)
            groups = sum(r["groups_mean"] for r in group) / len(group)
            out.append(
                f"{text[0].upper()}{text[1:]} leaves releases that say little beyond the histogram in "
                f"{len(group)} candidate(s): a gain of at most {gmax:.3f} (the best is {best_gain:.3f}), "
                f"{groups:,.0f} groups a release on average."
            )
    # the protected set's effect on the groups, at equal other settings
    sets: dict[str, list[float]] = {}
    for r in lasting:
        sets.setdefault(_protection(r, domain_size), []).append(r["groups_mean"])
    if len(sets) > 1:
        parts = [f"{k} keeps {sum(v) / len(v):,.0f} groups a release" for k, v in
                 sorted(sets.items(), key=lambda kv: -sum(kv[1]) / len(kv[1]))]  # fmt: skip
        out.append("Averaged over the candidates that last: " + "; ".join(parts) + ".")
    refused = [r for r in rows if r["refused_at"] is not None]
    if refused:
        first = min(refused, key=lambda r: r["refused_at"])
        out.append(
            f"{len(refused)} candidate(s) stop before release {rounds + 1}; the earliest, {first['candidate']}, "
            f"is refused at release {first['refused_at']} ({first['published']} published)."
        )
    parts_rows = [r for r in lasting if r["known_breach"]]
    gain_parts = max((r["gain"] for r in parts_rows), default=None)
    gain_sound = max((r["gain"] for r in sound), default=None)
    if gain_parts is not None and gain_sound is not None and round(gain_parts, 3) > round(gain_sound, 3):
        out.append(
            f"The 'parts' partition model gains up to {gain_parts:.3f} against {gain_sound:.3f} for the sound "
            "one, but its partition leaks the counts it read: a model with a known breach "
            "(docs/threat-model.md), shown only as a what-if."
        )
    return out


def _protected_legend(r: dict[str, Any]) -> str:
    """The protected set of a frontier's legend: the setting and, for ``rarest:m`` and a
    list, its values (a short text)."""
    spec = r["settings"]["protected_values"]
    if spec == "all":
        return "all"
    values = ", ".join(r["protected"])
    values = values if len(values) <= 48 else values[:47] + "…"
    return f"{spec}: {values}" if isinstance(spec, str) else values


def frontier(rows: Sequence[dict[str, Any]], rounds: int) -> str:
    """The frontier plot as inline SVG: per candidate its mean gain over the baseline against
    ℓ (the guarantee's strength, jittered per strategy), and gain against releases published.
    Each point is labelled with its rank in ``rows`` (the table's ``#``), in red when the
    candidate is flagged; its colour is its protected set (the setting that moves the gain
    most), filled when it lasts all ``rounds`` releases, a cross for a known breach."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9.0, 3.6))
    markers = {"constant": "o", "geometric": "s"}
    palette = [plt.get_cmap("tab10")(i) for i in range(10)]
    sets: dict[str, Any] = {}
    for rank, r in enumerate(rows, 1):
        s = r["settings"]
        gain = r["gain"] if r["gain"] is not None else 0.0
        x = s["l"] + (-0.06 if s["strategy"] == "constant" else 0.06)
        lasted = r["published"] >= rounds
        color = sets.setdefault(_protected_legend(r), palette[len(sets) % len(palette)])
        marker = "x" if r["known_breach"] else markers.get(s["strategy"], "o")
        face = color if lasted else "none"
        kw: dict[str, Any] = {"c": [color]} if marker == "x" else {"facecolors": [face], "edgecolors": [color]}
        label = plots.BOUND_COLOR if r["flags"] else "#333333"
        for ax, px in ((ax1, x), (ax2, r["published"])):
            ax.scatter([px], [gain], marker=marker, s=30, **kw)
            ax.annotate(str(rank), (px, gain), xytext=(4, 3), textcoords="offset points", fontsize=7, color=label)
    ax1.set_xlabel("ℓ (breach bound 1/ℓ)")
    ax1.set_ylabel("gain over the histogram (mean rel. error)")
    ax1.set_title("gain against the guarantee's strength")
    ax2.set_xlabel("releases published")
    ax2.set_title("gain against series length")
    for ax in (ax1, ax2):
        ax.axhline(0, color="#999999", lw=0.8)
    ax2.axvline(rounds, color=plots.BOUND_COLOR, lw=0.8, ls="--")
    handles = [plt.Line2D([], [], ls="", marker="o", color=c, label=f"protected {k}") for k, c in sets.items()]
    fig.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=min(len(handles), 3),
        frameon=False,
        fontsize=7,
    )
    fig.text(
        0.01,
        -0.02 - 0.05 * ((len(handles) + 2) // 3),
        "number: rank in the table (red: flagged); colour: "
        "protected values; circle: constant ratio; square: geometric; cross: partition model 'parts' (known "
        "breach); hollow: refused before the last release",
        fontsize=7,
    )
    return plots.to_svg(fig)


def write_page(path: Path, plan: dict[str, Any]) -> Path:
    """Write the plan's HTML page (``plan`` is the JSON document of ``serialpub plan``): the
    advice, the frontier and the ranked table with each candidate's flags, protected values
    as serialpub.yaml spells them, groups per release, and the learners' largest posterior
    beside the largest breach probability (the column only when the plan ran learners)."""
    rows = plan["candidates"]
    # what the page shows beside each row's figures, the JSON document left as it is
    shown = [
        dict(r, flag_texts=flag_texts(r), protected_setting=protected_setting(r),
             sparkline=sparkline(r["groups_per_release"], r["collapsed_releases"]))
        for r in rows
    ]  # fmt: skip
    learners = plan.get("learners") or []
    text = (
        environment()
        .get_template(TEMPLATE)
        .render(
            plan=plan,
            rows=shown,
            frontier=frontier(rows, plan["rounds"]),
            version=__version__,
            near=f"{1 - NEAR_BOUND:.0%}",
            learners=learners,
        )
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
