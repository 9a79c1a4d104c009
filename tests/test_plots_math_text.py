"""The report's plots parse their math text with one parser for every renderer
(serialpub/report/plots.py): the same SVG bytes as matplotlib's parser per renderer."""

from __future__ import annotations

import matplotlib.text
import numpy as np
import pytest

from anonymizer.measures.guarantee import BreachDistribution
from serialpub.report import plots


def drawn_labels(dist: BreachDistribution) -> str:
    fig = plots.breach_histogram(dist)
    fig.canvas.draw()
    labels = " ".join(t.get_text() for t in fig.axes[0].get_yticklabels())
    plots.plt.close(fig)
    return labels


def test_a_shared_math_text_parser_draws_the_same_svg(monkeypatch: pytest.MonkeyPatch) -> None:
    """The log axes' tick labels are math text; the report's plots parse them with one
    parser for every renderer (serialpub/report/plots.py). Drawn with matplotlib's own
    parser per renderer, the bytes are the same."""
    counts = np.array([0, 5, 300, 20000, 7, 0, 1, 0, 0, 2])
    dist = BreachDistribution(
        pairs=int(counts.sum()),
        max_p=0.24,
        mean_p=0.1,
        near_bound=3,
        above_bound=0,
        near_fraction=0.9,
        ell=4.0,
        edges=np.linspace(0.0, 1.0, 11),
        counts=counts,
    )

    def drawn() -> str:
        return plots.to_svg(plots.breach_histogram(dist))

    assert matplotlib.text.TextToPath is plots._SharedMathText
    assert "10^{" in drawn_labels(dist)  # the log axis labels its ticks as math text
    shared = drawn()
    monkeypatch.setattr(matplotlib.text, "TextToPath", plots.TextToPath)
    assert drawn() == shared
