"""``serialpub demo --rounds N`` for every N >= 1 (docs/commands.md, ``serialpub demo``).

With k' = 20 the constant ratio ñ_c is 29.4 at ℓ = 2: the first release needs every
protected value held by at most 1/ñ_c of the register's candidates. A series of N rounds
puts about 1/N of the register in its first snapshot, so for N <= 3 the most frequent
occupation already exceeded that share of the whole register and the search had no
generalization left to try (exit 2). The demo's k' now defaults to min(20, N)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from helpers import cli

from anonymizer import privacy
from serialpub.datasets import adult
from serialpub.demo import DEMO_K_PRIME, create_workspace, default_k_prime
from serialpub.simulate import PRESETS, SeriesSpec, simulate_series


def _largest_share(table: pd.DataFrame, rounds: int) -> float:
    """The largest share of the register one occupation holds in the demo's first snapshot:
    what the top-down search's root region (every candidate, ñ_c each) must stay under."""
    spec = SeriesSpec(rounds=rounds, carry_over=PRESETS["paper"]["carry_over"], redraw=PRESETS["paper"]["redraw"])
    first = simulate_series(table, adult.SENSITIVE, spec)[0]
    return int(first[adult.SENSITIVE].value_counts().max()) / len(table)


@pytest.mark.parametrize("rounds", [1, 2, 3])
def test_the_first_release_of_a_short_demo_has_room_under_its_k_prime(adult_table: pd.DataFrame, rounds: int) -> None:
    share = _largest_share(adult_table, rounds)
    assert share > 1 / privacy.constant_ratio_target(2, DEMO_K_PRIME)  # the old default: no partition
    assert default_k_prime(rounds) == rounds
    assert share <= 1 / privacy.constant_ratio_target(2, default_k_prime(rounds))


def test_the_twenty_round_demo_keeps_k_prime_20() -> None:
    assert default_k_prime(20) == default_k_prime(30) == 20


def _comment_above(text: str, line: str) -> str:
    """The comment lines right above ``line`` in a YAML file, joined into one text."""
    lines = text.splitlines()
    at = lines.index(line)
    above = []
    for previous in reversed(lines[:at]):
        if not previous.startswith("# "):
            break
        above.insert(0, previous[2:])
    return " ".join(above)


@pytest.mark.parametrize(("rounds", "k_prime", "noted"), [(2, None, True), (20, None, False), (2, 2, False)])
def test_the_file_says_when_the_demo_set_k_prime_to_its_rounds(
    tmp_path: Path, rounds: int, k_prime: int | None, noted: bool
) -> None:
    """The demo's serialpub.yaml is the file publishers copy: a k' lowered to the demo's few
    rounds says so where k_prime is set, with the value it replaced."""
    ws = create_workspace(tmp_path / "demo", rounds=rounds, k_prime=k_prime)
    written = ws.config.k_prime
    comment = _comment_above((ws.root / "serialpub.yaml").read_text(encoding="utf-8"), f"k_prime: {written}")
    assert comment.startswith("k' of the constant-ratio strategy")
    note = (
        f"serialpub demo set k' to its number of rounds, {rounds}, instead of 20 (the demo's default; 20 when k_prime "
        "is left out), so that its first release has room; choose k' for the length of your own series (serialpub "
        "strategy, serialpub plan)."
    )
    assert comment.endswith(note) == noted, comment
    assert ("set k' to" in comment) == noted


@pytest.mark.slow
def test_demo_with_two_rounds_publishes_both(tmp_path: Path) -> None:
    result = cli("demo", "--out", tmp_path / "demo", "--rounds", "2")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "demo" / "releases" / "adult").glob("release-*")) == [
        "release-0001", "release-0002",
    ]  # fmt: skip
    assert "k_prime: 2" in (tmp_path / "demo" / "serialpub.yaml").read_text()
