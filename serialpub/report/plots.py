"""The report's figures (matplotlib), as SVG text to inline into the HTML page.

SVG keeps the report one self-contained file that prints sharply; the output is made
deterministic (no date, fixed id salt) so the same figures give the same bytes and the
manifest's checksum of the report depends only on the release.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")  # no screen: figures are only ever written to files

import matplotlib.pyplot as plt
import matplotlib.text
import numpy as np
import numpy.typing as npt
from matplotlib.figure import Figure
from matplotlib.mathtext import MathTextParser
from matplotlib.textpath import TextToPath
from matplotlib.ticker import MaxNLocator

from anonymizer.measures.guarantee import BreachDistribution

plt.rcParams.update(
    {
        "svg.hashsalt": "serialpub",
        "svg.fonttype": "none",  # text stays text: smaller and searchable in the page
        "font.size": 9,
        "axes.spines.top": False,
        "axes.spines.right": False,
    }
)


class _SharedMathText(TextToPath):
    """matplotlib's text-to-path helper with one math-text parser for every renderer.

    A log axis labels its ticks as math text (``$\\mathdefault{10^{2}}$``). matplotlib caches
    a parsed label per parser, but every renderer makes its own parser, and a tight SVG
    makes two renderers per figure (one to measure, one to draw): each label was parsed
    again (a fifth of the plots' time under a profile, and the same labels again in the
    next release's report). A parse depends on the label, the font and the resolution
    alone, so a shared parser draws the same bytes."""

    _parser = MathTextParser("path")

    def __init__(self) -> None:
        super().__init__()
        self.mathtext_parser = self._parser


# every renderer takes matplotlib.text's TextToPath when it is made (matplotlib's RendererBase)
matplotlib.text.TextToPath = _SharedMathText  # type: ignore[misc]

BOUND_COLOR = "#b2182b"
GLOBAL_COLOR = "#2166ac"
BASELINE_COLOR = "#ef8a62"


def to_svg(fig: Figure) -> str:
    """The figure as an SVG document (no XML header, ready to inline); closes the figure."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]


def to_png(fig: Figure, dpi: int = 110) -> bytes:
    """The figure as PNG bytes (for the README and documentation); closes the figure."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", dpi=dpi, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def breach_histogram(dist: BreachDistribution) -> Figure:
    """Distribution of breach probabilities of the linked pairs against 1/ℓ."""
    fig, ax = plt.subplots(figsize=(7.0, 3.0))
    centers = (dist.edges[:-1] + dist.edges[1:]) / 2
    shown = dist.counts > 0
    ax.bar(
        centers[shown],
        dist.counts[shown],
        width=np.diff(dist.edges)[shown],
        color=GLOBAL_COLOR,
        alpha=0.85,
        label="(individual, value) pairs",
    )
    bound = 1.0 / dist.ell
    ax.axvline(bound, color=BOUND_COLOR, lw=1.5, label=f"bound 1/ℓ = {bound:.3g}")
    ax.axvline(
        dist.near_fraction * bound, color=BOUND_COLOR, lw=1, ls="--", label=f"near the bound ({dist.near_fraction:g}/ℓ)"
    )
    if dist.counts.any():
        ax.set_yscale("log")
    ax.set_xlim(0, 1)
    ax.set_xlabel("breach probability p(o, s) over all releases")
    ax.set_ylabel("pairs (log scale)")
    ax.set_title(f"{dist.pairs:,} linked pairs; max p = {dist.max_p:.4f}")
    ax.legend(frameon=False, loc="upper right")
    return fig


def group_sizes(records: npt.ArrayLike, candidates: npt.ArrayLike, presence: bool) -> Figure:
    """Histograms of records per group and of candidates n_j per group."""
    rec = np.asarray(records)
    cand = np.asarray(candidates)
    fig, axes = plt.subplots(1, 2, figsize=(7.0, 2.8))
    panels = [(axes[0], rec, "published records per group")]
    panels.append((axes[1], cand, "n_j: records per group (presence)" if presence else "n_j: candidates per group"))
    for ax, data, label in panels:
        if data.size:
            top = max(int(data.max()), 1)
            bins = np.unique(np.geomspace(1, top + 1, num=min(40, top + 1)).astype(int))
            ax.hist(data, bins=bins if bins.size > 1 else 1, color=GLOBAL_COLOR, alpha=0.85)
            ax.set_xscale("log")
        ax.set_xlabel(label)
        ax.set_ylabel("groups")
    fig.suptitle(f"{rec.size:,} QI-groups", fontsize=9)
    return fig


def series_breach(
    releases: Sequence[int], max_p: Sequence[float], baseline: Sequence[float] | None, ell: float
) -> Figure:
    """Maximum breach probability after each release: global guarantee vs localized baseline."""
    fig, ax = plt.subplots(figsize=(7.0, 3.0))
    ax.plot(releases, max_p, marker="o", ms=3, color=GLOBAL_COLOR, label="global guarantee (published)")
    if baseline is not None:
        ax.plot(
            releases[: len(baseline)],
            baseline,
            marker="s",
            ms=3,
            color=BASELINE_COLOR,
            label="localized baseline (per-release ℓ-diversity)",
        )
    ax.axhline(1.0 / ell, color=BOUND_COLOR, lw=1.2, ls="--", label=f"bound 1/ℓ = {1 / ell:.3g}")
    ax.set_ylim(0, 1.02)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("release")
    ax.set_ylabel("max breach probability")
    # below the axes: the baseline runs along the top and the series across the middle
    ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3)
    return fig


def series_utility(
    releases: Sequence[int],
    query_error: Sequence[float | None],
    avg_group: Sequence[float],
    joint_error: Sequence[float | None] | None = None,
    baseline_error: Sequence[float | None] | None = None,
) -> Figure:
    """Average relative query error across releases, and average group size.

    The error panel shows the register-joint estimator's error (the primary figure, about
    0.2-0.3 on the demo) beside the histogram-only baseline's where given, on its own axis:
    paper 001's uniform reading (up to 25 on the demo) would flatten it, so it leaves the
    plot (the series table keeps it). A series published before the register-joint figure
    existed has none: then the uniform error is plotted, labelled as such.
    """
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(7.0, 2.8))

    def floats(values: Sequence[float | None]) -> npt.NDArray[np.float64]:
        return np.array([np.nan if e is None else e for e in values], dtype=float)

    if joint_error is not None and any(e is not None for e in joint_error):
        a1.plot(releases, floats(joint_error), marker="o", ms=3, color=GLOBAL_COLOR, label="register-joint")
        if baseline_error is not None and any(e is not None for e in baseline_error):
            a1.plot(
                releases,
                floats(baseline_error),
                marker="s",
                ms=3,
                ls="--",
                color=BASELINE_COLOR,
                label="histogram alone (baseline)",
            )
        a1.set_ylabel("average relative query error\n(register-joint)")
    else:
        a1.plot(releases, floats(query_error), marker="o", ms=3, color=GLOBAL_COLOR, label="uniform (paper 001)")
        a1.set_ylabel("average relative query error\n(uniform, paper 001)")
    a1.legend(frameon=False, fontsize=7)
    a1.set_xlabel("release")
    a1.set_ylim(bottom=0)
    a2.plot(releases, avg_group, marker="o", ms=3, color=GLOBAL_COLOR)
    a2.set_xlabel("release")
    a2.set_ylabel("average records per group")
    a2.set_ylim(bottom=0)
    for ax in (a1, a2):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return fig
