"""The table of a release published with another tool, as ``serialpub import-release``
reads it (:mod:`serialpub.workflow.importing`): the file (CSV or Parquet), its labels as
nodes of the hierarchies, its records grouped by equal labels, and the check that a group's
region holds enough individuals for its records. Every refusal names the file, the line or
row, the column and the value (docs/design.md section 1)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from anonymizer.hierarchy import Hierarchy
from anonymizer.regions import ReleaseGroups, group_release, record_nodes
from serialpub.config import Workspace
from serialpub.errors import InputError, quoted
from serialpub.io.inputs import read_csv
from serialpub.workflow.dataset_inputs import DatasetInputs

IntArray = npt.NDArray[np.int64]


def _is_parquet(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == b"PAR1"


def read_release_data(path: Path, columns: Sequence[str]) -> tuple[pd.DataFrame, str]:
    """A release data file (Parquet or CSV) as text columns, and how its rows are named
    in messages ("line" for CSV with the header as line 1, "row" for Parquet, 1-based).

    Raises:
        InputError: missing or unreadable file, a missing or extra column, no rows, or an
            empty cell (file, line/row and column named).
    """
    if not path.is_file():
        raise InputError(f"{path}: release data file not found")
    parquet = _is_parquet(path)
    if parquet:
        unit, offset = "row", 1
        try:
            table = pq.read_table(path)
        except Exception as exc:  # pyarrow raises several unrelated types for a broken file
            raise InputError(f"{path}: not a readable Parquet file ({type(exc).__name__}: {exc})") from None
        names = list(table.column_names)
    else:
        unit, offset = "line", 2
        frame = read_csv(path, "release data")
        names = list(frame.columns)
    missing = [c for c in columns if c not in names]
    if missing:
        raise InputError(
            f"{path}: missing column(s) {', '.join(map(repr, missing))}; a release holds one column per "
            f"quasi-identifier and the sensitive column: {', '.join(columns)}"
        )
    extra = [c for c in names if c not in columns]
    if extra:
        raise InputError(
            f"{path}: unexpected column(s) {', '.join(map(repr, extra))}; a release holds exactly "
            f"{', '.join(columns)} (no identifier, nothing derived from one)"
        )
    if parquet:
        cols: dict[str, Any] = {}
        for c in columns:
            col = table.column(c)
            if col.null_count:
                i = int(np.flatnonzero(pc.is_null(col).to_numpy(zero_copy_only=False))[0])
                raise InputError(f"{path}, row {i + 1}, column {c!r}: empty value; every cell needs a value")
            try:
                text = (
                    col
                    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type)
                    else pc.cast(col, pa.string())
                )
            except pa.ArrowInvalid as exc:
                raise InputError(f"{path}, column {c!r}: cannot read its values as text ({exc})") from None
            cols[c] = np.asarray(text.to_numpy(zero_copy_only=False), dtype=object).astype(str)
        frame = pd.DataFrame(cols)
    if frame.empty:
        raise InputError(f"{path}: the release has no records; there is nothing to import")
    for c in columns:
        empty = (frame[c] == "").to_numpy()
        if empty.any():
            i = int(np.flatnonzero(empty)[0])
            raise InputError(f"{path}, {unit} {i + offset}, column {c!r}: empty value; every cell needs a value")
    return frame[list(columns)], unit


def group_labels(hierarchies: Sequence[Hierarchy], qis: Sequence[str], nodes: IntArray) -> dict[str, str]:
    return {q: hierarchies[a].labels[int(nodes[a])] for a, q in enumerate(qis)}


def shown_labels(labels: dict[str, str]) -> str:
    return "(" + ", ".join(f"{k}={v}" for k, v in labels.items()) + ")"


@dataclass(frozen=True)
class ReadRelease:
    """An imported release as read: its table, the file's unit (``line`` or ``row``) and the
    first number of that unit, the hierarchies it is read with (in QI order) and its groups."""

    table: pd.DataFrame
    unit: str
    hierarchies: list[Hierarchy]
    groups: ReleaseGroups


def read_groups(ws: Workspace, inputs: DatasetInputs, data_path: Path, values: Sequence[str]) -> ReadRelease:
    """Read the release file and group its records (equal labels), each record's value an
    index into the state's protected values, -1 for the values the other tool did not protect.

    Raises:
        InputError: a label that is not a node of its QI's hierarchy, or a sensitive value
            outside the domain (file, line or row, column and value named).
    """
    qis, sens = inputs.qis, inputs.sensitive
    table, unit = read_release_data(data_path, [*qis, sens])
    offset = 2 if unit == "line" else 1
    # a numeric QI's intervals are nodes of the hierarchy this release is read with
    read_with = inputs.read_hierarchies(table)
    hierarchies = [read_with[q] for q in qis]
    nodes = record_nodes(table, qis, hierarchies)
    for a, q in enumerate(qis):
        bad = nodes[:, a] < 0
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(
                f"{data_path}, {unit} {i + offset}, column {q!r}: value {quoted(table[q].iloc[i])} is not a "
                "label of the "
                f"hierarchy of {q!r} ({ws.hierarchy_dir / f'{q}.csv'}); every generalized value must be one of its "
                "nodes (a leaf, an inner node or '*')"
                + (
                    " or, as the configuration declares it numeric, a closed interval [lo, hi] holding one of its "
                    "leaves and nested in or disjoint from the file's other intervals"
                    if q in inputs.numeric
                    else ""
                )
            )
    sens_values = table[sens].to_numpy(dtype=str)
    if inputs.sensitive_domain is not None:
        outside = ~np.isin(sens_values, inputs.sensitive_domain)
        if outside.any():
            i = int(np.flatnonzero(outside)[0])
            raise InputError(
                f"{data_path}, {unit} {i + offset}, column {sens!r}: value {quoted(sens_values[i])} is not in the "
                f"sensitive domain (the leaves of {ws.hierarchy_dir / f'{sens}.csv'})"
            )
    value = pd.Index(inputs.protected).get_indexer(pd.Index(sens_values)).astype(np.int64)
    value[~np.isin(sens_values, values)] = -1
    groups = group_release(nodes, value, len(inputs.protected), hierarchies)
    return ReadRelease(table, unit, hierarchies, groups)


def check_cover(
    path: Path,
    hierarchies: Sequence[Hierarchy],
    qis: Sequence[str],
    groups: ReleaseGroups,
    available: IntArray,
    what: str,
    meaning: str,
) -> None:
    short = np.flatnonzero(groups.records > available)
    if short.size:
        g = int(short[0])
        shown = shown_labels(group_labels(hierarchies, qis, groups.nodes[g]))
        raise InputError(
            f"{path}: group {shown} holds {groups.records[g]} record(s) but "
            f"only {available[g]} {what} lie in its region ({short.size} such group(s)); {meaning}"
        )
