"""What a refused release says: the cause the top-down search found, not the QI cell it
happened to stop at, and how the geometric strategy's targets actually grow for the
configured α (computed with :func:`anonymizer.privacy.geometric_sequence`)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from helpers import make_workspace, snapshot

from anonymizer import privacy
from anonymizer.hierarchy import Hierarchy
from anonymizer.search import CellInfeasibleError, Cells, InfeasibleError, RequirementInfeasibleError
from anonymizer.topdown import partition
from serialpub.config import load_config
from serialpub.errors import InputError
from serialpub.workflow.drafting import infeasible_advice
from serialpub.workflow.publisher import Publisher

ZIP = Hierarchy.from_rows("zip", [(i + 1, [z, "*"]) for i, z in enumerate(["a", "b", "c", "d"])], "zip.csv")


def _cells(candidates: list[int], records: list[int], requirement: list[float]) -> Cells:
    return Cells(
        keys=np.arange(4, dtype=np.int64)[:, None],
        candidates=np.array(candidates, dtype=np.int64),
        records=np.array(records, dtype=np.int64),
        counts=np.array(records, dtype=np.int64)[:, None],
        requirement=np.array(requirement, dtype=np.float64)[:, None],
    )


@pytest.mark.parametrize("high", [100.0, np.inf])
def test_the_refusal_names_the_individuals_whose_requirement_blocks_not_where_the_search_stopped(high: float) -> None:
    """Cell a (one individual, linked before: requirement 100, or never again) holds no
    record; cell b holds the one record of the value with one candidate at requirement 3.
    The whole domain fails a's requirement (12 candidates < 100 × 1), the forced split
    reaches the leaves, and b alone cannot meet 3: the search stops at b. The cause is a,
    which the message names; b, which a group with c and d would carry, it does not (it
    used to say "the individuals with QI values (zip=b) hold more records ...")."""
    with pytest.raises(InfeasibleError) as err:
        partition(_cells([1, 1, 5, 5], [0, 1, 0, 0], [high, 3.0, 3.0, 3.0]), [ZIP], presence=False)
    assert isinstance(err.value, RequirementInfeasibleError)
    message = str(err.value)
    assert "zip=b" not in message and "1 individual(s), e.g. those with QI values (zip=a)," in message
    assert "stopped at 1 QI combination(s) that cannot meet their own requirement alone" in message
    if np.isfinite(high):
        assert "need 100 candidates per record of protected value 0 in their group" in message
        assert "would need 100 candidates for the snapshot's 1 records of it and has 12" in message
    else:
        assert "may not be linked to protected value 0 again" in message
    # the caller names the value as the operator knows it
    described = err.value.describe(["'hiv'"])
    assert "'hiv'" in described and "protected value" not in described


def test_a_cell_that_fails_in_every_partition_is_the_one_named() -> None:
    """A cell whose individuals may not be linked to the value again and that holds records
    of it breaks every group that holds it: it is the cause, and named."""
    with pytest.raises(CellInfeasibleError) as err:
        partition(_cells([1, 1, 5, 5], [0, 1, 0, 0], [3.0, np.inf, 3.0, 3.0]), [ZIP], presence=False)
    assert "the individuals with QI values (zip=b) may not be linked to protected value 0 again" in str(err.value)
    assert "'flu'" in err.value.describe(["'flu'"])


@pytest.mark.parametrize(
    ("ell", "alpha", "shown"),
    [(2.0, 1.5, "3, 6, 15, 42, 123"), (2.0, 2.0, "4, 6, 10, 18, 34"), (3.0, 1.5, "4.5, 10.5, 28.5, 82.5, 244.5")],
)
def test_the_geometric_advice_states_the_targets_of_the_configured_alpha(
    tmp_path: Path, ell: float, alpha: float, shown: str
) -> None:
    """The advice used to say that the targets double with each linked release; at α = 1.5
    they go 3, 6, 15, 42, 123, and at α = 2 (ℓ = 2) 4, 6, 10, 18, 34."""
    assert ", ".join(f"{t:g}" for t in privacy.geometric_sequence(ell, alpha, 5)[0]) == shown  # the formula's own
    root = make_workspace(tmp_path / "ws", strategy="geometric", alpha=alpha, k_prime=None, l=ell)
    history: Any = SimpleNamespace(max_breach=lambda: 0.4948)
    advice = infeasible_advice(load_config(root).config, history)
    assert f"at α = {alpha:g} and ℓ = {ell:g} the first 5 targets are {shown}" in advice
    assert "double" not in advice and "0.4948" in advice


@pytest.mark.slow
def test_a_refused_geometric_series_names_the_cause_and_the_growth(tmp_path: Path) -> None:
    """The clinic under α = 1.5 with seed 5 is refused at release 6: the message names the
    value, the individuals whose raised requirement blocks it and the targets' growth."""
    root = make_workspace(tmp_path / "ws", seed=5, periods=6, strategy="geometric", alpha=1.5, k_prime=None)
    publisher = Publisher(load_config(root))
    for t in range(1, 6):
        publisher.publish(snapshot(root, t))
    with pytest.raises(InputError) as err:
        publisher.publish(snapshot(root, 6))
    message = str(err.value)
    assert "e.g. those with QI values (sex=" in message and "candidates per record of 'hiv' in their group" in message
    assert "hold more records of a protected value" not in message  # the old wording named where the search stopped
    assert "the first 5 targets are 3, 6, 15, 42, 123" in message and "double" not in message
