"""Shared fixtures: the bundled Adult table is read once per test session (about 2 s)."""

from __future__ import annotations

import pandas as pd
import pytest

from serialpub.datasets import adult


@pytest.fixture(scope="session")
def adult_table() -> pd.DataFrame:
    """The cleaned Adult table. Tests must not modify it (copy first)."""
    return adult.load_adult()
