"""The register cache (serialpub.io.register_cache): a fresh process takes the coded register
and the passed register suite of an unchanged register from the cache, never a stale entry."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from helpers import make_workspace, snapshot

from serialpub.config import DATABASE_ENV, load_config
from serialpub.errors import InputChecksFailed
from serialpub.io import register_cache
from serialpub.io.inputs import load_register
from serialpub.workflow.publisher import Publisher


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(DATABASE_ENV, raising=False)
    return make_workspace(tmp_path / "ws")


def _entries(root: Path) -> list[Path]:
    return sorted((root / register_cache.CACHE_DIR).glob("register-*.arrow"))


def _suite_sha(root: Path) -> str:
    """The register suite's evidence checksum as a fresh process gets it."""
    return Publisher(load_config(root)).check_register().sha256


def test_a_cached_register_is_the_parsed_one_with_the_same_verdict(root: Path) -> None:
    first = Publisher(load_config(root))
    first.publish(snapshot(root, 1))
    ran = first.check_register().sha256  # the suite ran in this process
    (entry,) = _entries(root)
    ctx = Publisher(load_config(root))
    cached = ctx._cached
    assert cached is not None and cached[2] is not None and cached[2]["success"]
    ws = load_config(root)
    parsed = load_register(ws.register_path, "id", ws.config.quasi_identifiers, ctx.hierarchies)
    assert list(cached[0]) == list(parsed.ids) and np.array_equal(cached[1], parsed.keys)
    ctx.publish(snapshot(root, 2))
    assert ctx.check_register().sha256 == ran  # the same evidence as running the suite
    assert _entries(root) == [entry]


def test_a_changed_register_or_hierarchy_is_never_read_from_the_cache(root: Path) -> None:
    Publisher(load_config(root)).publish(snapshot(root, 1))
    (first,) = _entries(root)
    register = root / "register.csv"
    _, sex, zipcode, age = register.read_text().splitlines()[1].split(",")
    register.write_text(register.read_text() + f"p999,X,{zipcode},{age}\n")  # 'X' is no leaf of sex
    with pytest.raises(InputChecksFailed, match="population register failed its input checks"):
        Publisher(load_config(root)).publish(snapshot(root, 2))
    assert _entries(root) == [first]  # a failed suite is not cached
    register.write_text(register.read_text().replace("p999,X,", f"p999,{sex},"))
    hierarchy = root / "hierarchies" / "age.csv"
    hierarchy.write_text(hierarchy.read_text().replace("[20, 24]", "[20-24]"))
    Publisher(load_config(root)).publish(snapshot(root, 2))
    (second,) = _entries(root)
    assert second != first  # a new key; the old entry is gone


def test_an_altered_entry_is_not_used(root: Path) -> None:
    """Codes changed in the entry (a disk error, an edit) do not reach the anonymizer: the
    entry fails its digest and the register is parsed again."""
    Publisher(load_config(root)).publish(snapshot(root, 1))
    (entry,) = _entries(root)
    key = entry.stem.removeprefix("register-")
    ids, keys, suite = register_cache.load(root, key)  # type: ignore[misc]
    altered = keys.copy()
    altered[0, 0] = (altered[0, 0] + 1) % 2  # individual 1's sex flipped
    digest = entry.with_suffix(".sha256").read_text()
    register_cache.save(root, key, ids, altered, load_config(root).config.quasi_identifiers, suite)
    entry.with_suffix(".sha256").write_text(digest)  # the entry edited, its digest not
    assert register_cache.load(root, key) is None
    ctx = Publisher(load_config(root))
    assert ctx._cached is None
    ws = load_config(root)
    parsed = load_register(ws.register_path, "id", ws.config.quasi_identifiers, ctx.hierarchies)
    assert np.array_equal(ctx.register.keys, parsed.keys)


def test_an_unreadable_entry_is_read_again_from_the_source(root: Path) -> None:
    Publisher(load_config(root)).publish(snapshot(root, 1))
    (entry,) = _entries(root)
    ran = _suite_sha(root)
    entry.write_bytes(b"not arrow")
    entry.with_suffix(".sha256").write_text(hashlib.sha256(b"not arrow").hexdigest())  # passes the digest
    Publisher(load_config(root)).publish(snapshot(root, 2))
    assert _suite_sha(root) == ran
    assert register_cache.load(root, entry.stem.removeprefix("register-")) is not None  # written again
