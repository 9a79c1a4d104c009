"""The plan's readable outputs: the ranking, the advice drawn from the figures, the
frontier plot and the HTML page in the report style (one self-contained file: inline CSS
and SVG, no scripts)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from serialpub import __version__
from serialpub.report import plots
from serialpub.report.render import environment

TEMPLATE = "plan.html.j2"


def ranked(rows: Sequence[dict[str, Any]], rounds: int) -> list[dict[str, Any]]:
    """The candidates by usefulness: those that publish all ``rounds`` releases first, by
    gain (largest first), then the others by releases published and gain."""

    def key(r: dict[str, Any]) -> tuple[int, int, float]:
        lasted = r["published"] >= rounds
        return (0 if lasted else 1, -r["published"], -(r["gain"] if r["gain"] is not None else float("-inf")))

    return sorted(rows, key=key)


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
    if sound:
        best = max(sound, key=lambda r: r["gain"])
        out.append(
            f"Of the candidates without a known breach that last all {rounds} releases, {best['candidate']} is the "
            f"most useful: mean query error {best['error']:.3f} against {best['baseline']:.3f} for the histogram "
            f"alone (gain {best['gain']:.3f}), {best['groups_mean']:,.0f} groups a release, largest breach "
            f"probability {best['max_breach']:.4f} (bound {best['bound']:.4f})."
        )
    elif rows:
        out.append(f"No candidate without a known breach publishes all {rounds} releases; see the refusals below.")
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


def frontier(rows: Sequence[dict[str, Any]], rounds: int) -> str:
    """The frontier plot as inline SVG: per candidate its mean gain over the baseline against
    ℓ (the guarantee's strength, jittered per strategy), filled when it lasts all ``rounds``
    releases, a cross for a model with a known breach; and gain against releases published."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9.0, 3.4))
    markers = {"constant": "o", "geometric": "s"}
    for r in rows:
        s = r["settings"]
        gain = r["gain"] if r["gain"] is not None else 0.0
        x = s["l"] + (-0.06 if s["strategy"] == "constant" else 0.06)
        lasted = r["published"] >= rounds
        color = plots.BASELINE_COLOR if r["known_breach"] else plots.GLOBAL_COLOR
        marker = "x" if r["known_breach"] else markers.get(s["strategy"], "o")
        face = color if lasted else "none"
        kw: dict[str, Any] = {"c": color} if marker == "x" else {"facecolors": face, "edgecolors": color}
        ax1.scatter([x], [gain], marker=marker, s=30, **kw)
        ax2.scatter([r["published"]], [gain], marker=marker, s=30, **kw)
    ax1.set_xlabel("ℓ (breach bound 1/ℓ)")
    ax1.set_ylabel("gain over the histogram (mean rel. error)")
    ax1.set_title("gain against the guarantee's strength")
    ax2.set_xlabel("releases published")
    ax2.set_title("gain against series length")
    for ax in (ax1, ax2):
        ax.axhline(0, color="#999999", lw=0.8)
    ax2.axvline(rounds, color=plots.BOUND_COLOR, lw=0.8, ls="--")
    fig.text(0.01, -0.04, "circle: constant ratio; square: geometric; cross: partition model 'parts' (known breach); "
             "hollow: refused before the last release", fontsize=7)  # fmt: skip
    return plots.to_svg(fig)


def write_page(path: Path, plan: dict[str, Any]) -> Path:
    """Write the plan's HTML page (``plan`` is the JSON document of ``serialpub plan``)."""
    rows = plan["candidates"]
    text = (
        environment()
        .get_template(TEMPLATE)
        .render(plan=plan, rows=rows, frontier=frontier(rows, plan["rounds"]), version=__version__)
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
