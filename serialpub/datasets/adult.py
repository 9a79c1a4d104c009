"""The bundled UCI Adult data (CC BY 4.0; see ``serialpub/data/adult/README.md``)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pandas as pd

COLUMNS = [
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "salary-class",
]
#: The ARX benchmark setup: quasi-identifiers and sensitive attribute.
QUASI_IDENTIFIERS = [
    "age",
    "education",
    "marital-status",
    "native-country",
    "race",
    "salary-class",
    "sex",
    "workclass",
]
#: Quasi-identifiers with numeric values, cut into [lo, hi] intervals by the top-down search.
NUMERIC = ["age"]
SENSITIVE = "occupation"
ID_COLUMN = "id"
#: Rows left after dropping every row that holds a '?' (30,162 train + 15,060 test).
CLEAN_ROWS = 45_222


def data_dir() -> Path:
    """Folder of the bundled Adult files and hierarchies."""
    return Path(str(resources.files("serialpub") / "data" / "adult"))


def hierarchy_dir() -> Path:
    """Folder of the bundled Adult hierarchies, ``<attribute>.csv``."""
    return data_dir() / "hierarchies"


def load_adult() -> pd.DataFrame:
    """The cleaned Adult table: 45,222 rows, train then test, rows with '?' dropped.

    Returns:
        DataFrame with column ``id`` (int64, 1..45222 in file order, stable across runs)
        followed by the 15 UCI columns; every column except the id holds strings, so that
        values match hierarchy leaves exactly (``age`` is "39", not 39). The test file's
        trailing '.' on the salary class is removed.
    """
    parts = []
    for name, skip in (("adult.data.gz", 0), ("adult.test.gz", 1)):
        df = pd.read_csv(
            data_dir() / name,
            header=None,
            names=COLUMNS,
            skiprows=skip,
            dtype=str,
            skipinitialspace=True,
            na_filter=False,
            compression="gzip",
        )
        df = df[df["age"].str.len() > 0]  # trailing blank lines
        parts.append(df)
    table = pd.concat(parts, ignore_index=True)
    table["salary-class"] = table["salary-class"].str.rstrip(".")
    table = table[~(table == "?").any(axis=1)].reset_index(drop=True)
    table.insert(0, ID_COLUMN, pd.RangeIndex(1, len(table) + 1).to_numpy(dtype="int64"))
    return table
