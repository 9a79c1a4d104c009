"""A release row's params (state.params.DraftParams): strict when written, readable for
rows an older serialpub wrote, stored with exactly the keys it was made with."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from anonymizer.settings import AfterKPrime, Algorithm, PartitionModel, Strategy, SuppressionModel
from serialpub.config import load_config
from serialpub.workflow import release_record
from serialpub.workflow.publisher import Publisher
from state.params import DraftParams
from state.store import StateStore, open_engine

#: a row as the first serialpub wrote it: none of the later settings, and a key since dropped
OLD_ROW = {"l": 2, "strategy": "geometric", "k_prime": None, "alpha": 0.5, "guarantee": "global",
           "dilution": "register", "suppression_budget": 0.05, "protected_values": ["hiv"], "snapshot": "s.csv",
           "retired_key": 1}  # fmt: skip


def test_a_row_written_before_the_later_settings_reads_as_those_releases_were_made() -> None:
    params = DraftParams.read(OLD_ROW)
    assert params.strategy is Strategy.GEOMETRIC and params.l == 2.0 and params.alpha == 0.5
    assert params.suppression_model is SuppressionModel.PAPER
    assert params.algorithm is Algorithm.BOTTOMUP
    assert params.after_k_prime is AfterKPrime.STOP
    assert params.partition_model is PartitionModel.PARTS
    assert (params.imported, params.repeats_snapshot_of, params.prepared_by) == (False, [], None)
    # the settings it did not record are not compared with its manifest
    assert set(params.recorded_settings()) == {
        "l", "strategy", "k_prime", "alpha", "guarantee", "dilution", "suppression_budget", "protected_values",
    }  # fmt: skip
    assert "retired_key" not in params.record() and params.record()["snapshot"] == "s.csv"


def test_writing_refuses_an_unknown_key_or_a_wrong_value() -> None:
    settings = {k: v for k, v in OLD_ROW.items() if k != "retired_key"}
    with pytest.raises(ValidationError, match="retired_key"):
        DraftParams(**settings, retired_key=1)
    with pytest.raises(ValidationError, match="strategy"):
        DraftParams(**{**settings, "strategy": "linear"})
    with pytest.raises(ValidationError, match="frozen"):
        DraftParams(**settings).l = 3.0  # type: ignore[misc]


@pytest.mark.slow
def test_a_drafted_row_stores_what_drafting_gave_it(published_once: Path) -> None:
    ws = load_config(published_once)
    [row] = StateStore(open_engine(ws.database_url)).published("clinic")
    settings = release_record.params_record(ws.config, Publisher(ws).inputs)
    # every setting as the draft recorded it, a null one (alpha) included
    assert row.params.recorded_settings() == DraftParams(**settings).record()
    assert row.params.alpha is None and "alpha" in row.params.record()
    assert set(row.params.record()) == {*settings, "snapshot", "snapshot_rows", "snapshot_sha256", "prepared_by",
                                        "four_eyes", "staged_manifest"}  # fmt: skip
