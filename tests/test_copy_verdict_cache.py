"""The data user's verification cache (serialpub.io.verdict_cache, serialpub.analysis.reader):
a public copy verified once is not verified again while its bytes, the key and the checking
code are the same; any changed, added or removed file, or another key, is verified afresh
(and a tampered copy refused); a corrupt or forged entry is ignored, never trusted."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers import SENSITIVE, cli

from serialpub.analysis import reader
from serialpub.errors import InputError
from serialpub.io import verdict_cache

RELEASES = Path("releases") / "clinic"


@pytest.fixture
def verifications(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the copy's signatures and chain were checked (one entry per check)."""
    calls: list[int] = []
    check = reader.check_store

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return check(*args, **kwargs)

    monkeypatch.setattr(reader, "check_store", counted)
    return calls


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("copy-*.json"))


def test_a_second_open_reads_the_verdict_and_gives_the_same_series(
    fresh: Path, tmp_path: Path, verifications: list[int]
) -> None:
    cache = tmp_path / "verdicts"
    first = reader.open_releases(fresh, cache_dir=cache)
    assert len(verifications) == 1 and len(_entries(cache)) == 1
    second = reader.open_releases(fresh, cache_dir=cache)
    assert len(verifications) == 1, "verified again although nothing changed"
    assert (second.key_fingerprint, second.key_source, second.notes) == (
        first.key_fingerprint,
        first.key_source,
        first.notes,
    )
    for a, b in zip(first.releases, second.releases, strict=True):
        pd.testing.assert_frame_equal(a.data, b.data)
    # asked for release 1 only: verified all the same, its answers those of a full open
    from serialpub.analysis.querying import answer, parse_condition

    one = reader.open_releases(fresh, cache_dir=cache, releases=[1])
    assert one.verified == 2 and 1 in [r.number for r in one.releases]
    condition = [parse_condition("zipcode=6500*", one.releases[-1].qis)]
    pd.testing.assert_frame_equal(answer(one, condition, releases=[1]), answer(first, condition, releases=[1]))
    with pytest.raises(InputError, match="no release 7; this copy holds releases 1-2"):
        reader.open_releases(fresh, cache_dir=cache, releases=[7])
    # a copy moved elsewhere holds the same bytes: the same verdict
    moved = shutil.copytree(fresh, tmp_path / "moved")
    reader.open_releases(moved, cache_dir=cache)
    assert len(verifications) == 1
    # without a cache folder every open verifies and nothing is written
    reader.open_releases(fresh)
    assert len(verifications) == 2 and len(_entries(cache)) == 1


@pytest.mark.slow
def test_a_cached_answer_equals_an_uncached_one(fresh: Path, tmp_path: Path) -> None:
    ask = ["query", ".", "--where", "zipcode=6500*", "--sensitive", "flu,cold", "--json"]
    uncached = cli(*ask, "--no-cache", cwd=fresh)
    assert uncached.returncode == 0, uncached.stderr
    assert not (tmp_path / "verdicts").exists()
    first = cli(*ask, "--cache-dir", tmp_path / "verdicts", cwd=fresh)
    second = cli(*ask, "--cache-dir", tmp_path / "verdicts", cwd=fresh)
    assert len(_entries(tmp_path / "verdicts")) == 1
    assert json.loads(first.stdout) == json.loads(second.stdout) == json.loads(uncached.stdout)
    # the default folder is SERIALPUB_CACHE_DIR's
    env = cli(*ask, cwd=fresh, env={"SERIALPUB_CACHE_DIR": str(tmp_path / "env")})
    assert env.returncode == 0 and len(_entries(tmp_path / "env")) == 1


def _flip(path: Path, at: int = -1) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def _edit_parquet(copy: Path) -> None:
    path = copy / RELEASES / "release-0002" / "data.parquet"
    frame = pd.read_parquet(path)
    frame.loc[0, SENSITIVE] = "hiv" if frame.loc[0, SENSITIVE] != "hiv" else "flu"
    frame.to_parquet(path, index=False)


def _edit_manifest(copy: Path) -> None:
    path = copy / RELEASES / "release-0001" / "manifest.json"
    path.write_text(path.read_text(encoding="utf-8").replace('"period"', '"period" ', 1), encoding="utf-8")


def _edit_signature(copy: Path) -> None:
    sig = copy / RELEASES / "release-0001" / "manifest.sig"
    sig.write_text("AAAA" + sig.read_text(encoding="ascii")[4:], encoding="ascii")


def _edit_register(copy: Path) -> None:
    shutil.rmtree(copy / "registers")
    path = copy / "register.csv"
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text(
        "\n".join([*lines[:-1], lines[-1].replace(",M,", ",X,").replace(",F,", ",M,").replace(",X,", ",F,")]) + "\n"
    )


def _edit_hierarchy(copy: Path) -> None:
    """A leaf of zipcode moved under another parent, in every version the copy holds."""
    for path in [copy / "hierarchies" / "zipcode.csv", *(copy / "hierarchy-versions" / "zipcode").glob("*.csv")]:
        lines = path.read_text(encoding="utf-8").splitlines()
        leaf, _, top = lines[0].split(";")
        path.write_text("\n".join([f"{leaf};elsewhere;{top}", *lines[1:]]) + "\n", encoding="utf-8")


def _other_key(copy: Path) -> None:
    pem = (
        Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    (copy / "keys" / "publisher.pub").write_bytes(pem)


def _remove_register_version(copy: Path) -> None:
    for p in (copy / "registers").iterdir():
        p.unlink()


@pytest.mark.parametrize(
    "tamper",
    [_edit_parquet, _edit_manifest, _edit_signature, _edit_register, _edit_hierarchy, _other_key],
)
def test_a_copy_tampered_after_its_verdict_is_verified_afresh_and_refused(
    fresh: Path, tmp_path: Path, tamper: Callable[[Path], None], verifications: list[int]
) -> None:
    cache = tmp_path / "verdicts"
    reader.open_releases(fresh, cache_dir=cache)
    assert len(verifications) == 1
    tamper(fresh)
    with pytest.raises(InputError):
        reader.open_releases(fresh, cache_dir=cache)
    assert len(_entries(cache)) == 1, "a refused copy leaves no verdict"


def test_any_byte_of_any_file_added_or_removed_is_a_new_state(fresh: Path, tmp_path: Path) -> None:
    """The key covers every file the verification reads, whatever the file; checked on the
    key itself so that a change the checks would let pass (an added file) is covered too."""

    def key(copy: Path) -> str | None:
        dataset, dirs = reader.release_dirs(copy, None)
        key_text, pinned = reader.given_key(copy / "keys" / "publisher.pub", None)
        return reader._copy_state(copy, dataset, dirs, None, key_text, pinned, "id")

    base = key(fresh)
    assert base is not None and key(fresh) == base
    files = [p for p in fresh.rglob("*") if p.is_file() and p.name != "README.md"]
    assert {p.name for p in files} >= {"data.parquet", "manifest.json", "manifest.sig", "register.csv", "zipcode.csv"}
    for path in files:
        _flip(path)
        assert key(fresh) != base, path
        _flip(path)
    assert key(fresh) == base
    (fresh / RELEASES / "release-0001" / "extra.txt").write_text("x")
    assert key(fresh) != base
    (fresh / RELEASES / "release-0001" / "extra.txt").unlink()
    _remove_register_version(fresh)
    assert key(fresh) != base
    # another key given, or a pinned fingerprint, is another state as well
    dataset, dirs = reader.release_dirs(fresh, None)
    assert reader._copy_state(fresh, dataset, dirs, None, None, "SHA256:x", "id") != reader._copy_state(
        fresh, dataset, dirs, None, None, None, "id"
    )


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda entry: entry.write_bytes(b"{not json"),  # its digest no longer matches
        lambda entry: entry.with_suffix(".sha256").unlink(),
        lambda entry: _forge(entry, {"key": "another", "releases": 2, "notes": [], "key_fingerprint": None}),
        lambda entry: _forge(entry, {"releases": "2", "notes": "x"}),
        lambda entry: _forge(entry, ["a", "list"]),
    ],
)
def test_a_corrupt_or_forged_entry_is_ignored_and_the_copy_verified(
    fresh: Path, tmp_path: Path, corrupt: Callable[[Path], None], verifications: list[int]
) -> None:
    cache = tmp_path / "verdicts"
    reader.open_releases(fresh, cache_dir=cache)
    (entry,) = _entries(cache)
    key = entry.stem.removeprefix("copy-")
    corrupt(entry)
    assert verdict_cache.load_copy(cache, key) is None
    opened = reader.open_releases(fresh, cache_dir=cache)
    assert len(verifications) == 2 and len(opened.releases) == 2
    assert verdict_cache.load_copy(cache, key) is not None, "the fresh verdict replaces the corrupt one"


def _forge(entry: Path, record: object) -> None:
    """An entry with an intact digest but content of another shape or key."""
    from serialpub.io.register_cache import commit

    tmp = entry.with_name("forged.tmp")
    tmp.write_bytes(json.dumps(record).encode())
    commit(tmp, entry)


def test_the_cache_folder_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SERIALPUB_CACHE_DIR", str(tmp_path / "a"))
    assert verdict_cache.user_cache_dir() == tmp_path / "a"
    monkeypatch.delenv("SERIALPUB_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert verdict_cache.user_cache_dir() == tmp_path / "xdg" / "serialpub"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert verdict_cache.user_cache_dir() == tmp_path / "home" / ".cache" / "serialpub"


def test_an_unwritable_cache_folder_only_costs_the_next_verification(fresh: Path, tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    opened = reader.open_releases(fresh, cache_dir=blocked / "verdicts")
    assert len(opened.releases) == 2


def test_releases_of_one_register_version_resolve_it_once(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The register's QI combinations are computed once per register table, not per release,
    and each release's resolution is the one it gets alone."""
    calls: list[int] = []
    cells = reader.register_cells

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return cells(*args, **kwargs)

    monkeypatch.setattr(reader, "register_cells", counted)
    copy = reader.open_releases(fresh)
    shared = [r.joint() for r in copy.releases]
    assert len(copy.releases) == 2 and len(calls) == 1
    alone = reader.open_releases(fresh)
    for r in alone.releases:
        r.cells_memo = {}
    for a, b in zip(shared, [r.joint() for r in alone.releases], strict=True):
        for name in ("group_nodes", "counts", "cell_leaves", "cell_counts", "group_of_cell"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert len(calls) == 3


# -- the resolved arrays kept beside a verdict (serialpub.analysis.copy_cache) ------------


def _arrays(folder: Path) -> list[Path]:
    """The resolutions kept: the coded registers and the releases' entries."""
    return [p for p in sorted(folder.glob("copy-*.*.npz")) if ".labels-" not in p.name]


def _labels(folder: Path) -> list[Path]:
    """The releases' labels alone (every release of a verified copy)."""
    return sorted(folder.glob("copy-*.labels-*.npz"))


def _answers(copy: reader.PublicReleases) -> pd.DataFrame:
    from serialpub.analysis.querying import Query, answers, parse_condition

    qis = copy.releases[-1].qis
    asked = [
        Query((parse_condition("zipcode=6500*", qis),), ("flu", "cold")),
        Query((parse_condition("age=[22,25]", qis), parse_condition("sex=F", qis))),
        Query(()),
    ]
    return answers(copy, asked)


def test_a_second_open_answers_from_the_cached_arrays_without_the_register_or_the_tables(
    fresh: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "verdicts"
    resolved: list[int] = []
    cells = reader.register_cells

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        resolved.append(1)
        return cells(*args, **kwargs)

    monkeypatch.setattr(reader, "register_cells", counted)
    uncached = _answers(reader.open_releases(fresh))
    first = reader.open_releases(fresh, cache_dir=cache)
    made = _answers(first)
    assert len(_arrays(cache)) == 3, "one coded register (both releases share it) and one entry per release"
    assert len(_labels(cache)) == 2, "the labels of each release"
    calls = len(resolved)
    second = reader.open_releases(fresh, cache_dir=cache)
    again = _answers(second)
    assert len(resolved) == calls, "the register was coded again although its arrays were cached"
    assert all(r.sources.data is None and r.sources.register is None for r in second.releases), "a table was read"
    pd.testing.assert_frame_equal(again, made)
    pd.testing.assert_frame_equal(again, uncached)
    for a, b in zip(first.releases, second.releases, strict=True):
        ja, jb = a.joint(), b.joint()
        for name in ("group_nodes", "counts", "cell_leaves", "cell_counts", "group_of_cell"):
            np.testing.assert_array_equal(getattr(ja, name), getattr(jb, name))
            assert getattr(ja, name).dtype == getattr(jb, name).dtype
        assert ja.sensitive_values == jb.sensitive_values and ja.suppressed == jb.suppressed
        # the numeric QIs' hierarchies rebuilt from the cached labels are those read from the table
        assert {q: h.labels for q, h in a.hierarchies.items()} == {q: h.labels for q, h in b.hierarchies.items()}
        assert a.records == b.records == len(b.data)  # the table is still there when asked for
        pd.testing.assert_frame_equal(a.groups(), b.groups())


@pytest.mark.slow
def test_the_json_of_every_query_mode_is_the_same_with_and_without_the_cache(fresh: Path, tmp_path: Path) -> None:
    (tmp_path / "q.txt").write_text("sex=F AND age=[22,25]\nzipcode=6500* AND disease=flu|cold\n", encoding="utf-8")
    modes = [
        ["--where", "zipcode=6500*", "--sensitive", "flu,cold"],
        ["--by", "sex,zipcode", "--where", "age=[21,27]"],
        ["--queries", str(tmp_path / "q.txt")],
        ["--where", "sex=F", "--release", "2"],
    ]
    for mode in modes:
        ask = ["query", ".", *mode, "--json"]
        uncached = cli(*ask, "--no-cache", cwd=fresh)
        first = cli(*ask, "--cache-dir", tmp_path / "verdicts", cwd=fresh)
        second = cli(*ask, "--cache-dir", tmp_path / "verdicts", cwd=fresh)
        assert uncached.returncode == first.returncode == second.returncode == 0, uncached.stderr + second.stderr
        assert second.stdout == first.stdout == uncached.stdout, mode
    assert len(_arrays(tmp_path / "verdicts")) == 3


@pytest.mark.parametrize(
    "tamper",
    [_edit_parquet, _edit_manifest, _edit_signature, _edit_register, _edit_hierarchy, _other_key],
)
def test_a_copy_tampered_after_its_arrays_were_cached_is_refused(
    fresh: Path, tmp_path: Path, tamper: Callable[[Path], None], verifications: list[int]
) -> None:
    cache = tmp_path / "verdicts"
    _answers(reader.open_releases(fresh, cache_dir=cache))
    assert len(_arrays(cache)) == 3
    tamper(fresh)
    with pytest.raises(InputError):
        _answers(reader.open_releases(fresh, cache_dir=cache))
    assert len(verifications) == 2, "the tampered copy was not verified afresh"
    assert len(_arrays(cache)) == 3, "a refused copy leaves no arrays"


def test_arrays_are_kept_only_under_the_state_they_were_made_from(fresh: Path, tmp_path: Path) -> None:
    """A file changed after the copy was opened and before its arrays were made: nothing is
    kept under the state that was verified (the arrays may be of the changed file)."""
    cache = tmp_path / "verdicts"
    opened = reader.open_releases(fresh, cache_dir=cache)
    _edit_register(fresh)
    for r in opened.releases:
        with contextlib.suppress(InputError):
            r.joint()
    assert _arrays(cache) == []


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda entry: _flip(entry, 200),  # its digest no longer matches
        lambda entry: entry.with_suffix(".sha256").unlink(),
        lambda entry: _forge_arrays(entry, {"group_nodes": np.zeros((3, 1), dtype=np.int64)}),  # not the shapes
        lambda entry: _forge_arrays(entry, {"values": np.array(["x"], dtype=object)}),  # needs pickle
        lambda entry: _forge_arrays(entry, {"count_at": np.array([10**9]), "count": np.array([10**6])}),  # outside
        lambda entry: _forge_arrays(entry, {"count_at": np.array([3, 3]), "count": np.array([1, 2])}),  # twice
        lambda entry: _forge_arrays(entry, {"count": np.array([1])}),  # not one count per entry
        lambda entry: _forge_bytes(entry, b"not an archive"),
    ],
)
def test_a_corrupt_or_forged_arrays_entry_is_ignored_and_made_afresh(
    fresh: Path, tmp_path: Path, corrupt: Callable[[Path], None]
) -> None:
    cache = tmp_path / "verdicts"
    made = _answers(reader.open_releases(fresh, cache_dir=cache))
    entry = next(p for p in _arrays(cache) if ".release-0002." in p.name)
    corrupt(entry)
    again = reader.open_releases(fresh, cache_dir=cache)
    pd.testing.assert_frame_equal(_answers(again), made)
    assert again.releases[1].sources.data is not None, "release 2 was answered from a corrupt entry"
    # made afresh: the next open reads it
    third = reader.open_releases(fresh, cache_dir=cache)
    pd.testing.assert_frame_equal(_answers(third), made)
    assert all(r.sources.data is None for r in third.releases)


def _forge_arrays(entry: Path, changed: dict[str, np.ndarray]) -> None:
    """The entry with some arrays replaced, and an intact digest."""
    with np.load(entry, allow_pickle=False) as archive:
        arrays = {k: archive[k] for k in archive.files}
    buffer = io.BytesIO()
    np.savez(buffer, **{**arrays, **changed})
    _forge_bytes(entry, buffer.getvalue())


def _forge_bytes(entry: Path, content: bytes) -> None:
    from serialpub.io.register_cache import commit

    tmp = entry.with_name("forged.tmp")
    tmp.write_bytes(content)
    commit(tmp, entry)


def test_the_arrays_go_with_their_verdict(fresh: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verdict_cache, "KEEP", 1)
    cache = tmp_path / "verdicts"
    _answers(reader.open_releases(fresh, cache_dir=cache))
    old = _arrays(cache)
    (fresh / "keys" / "note.txt").write_text("another state")
    _answers(reader.open_releases(fresh, cache_dir=cache))
    kept = _arrays(cache)
    assert len(kept) == 3 and not set(old) & set(kept)
    kept += _labels(cache)
    assert sorted(p.name for p in cache.iterdir()) == sorted(
        [*(p.name for p in kept), *(p.with_suffix(".sha256").name for p in kept), *(
            f"{_entries(cache)[0].stem}{s}" for s in (".json", ".sha256"))]
    )  # fmt: skip


def test_a_release_read_but_not_resolved_is_not_decoded_from_the_cache(fresh: Path, tmp_path: Path) -> None:
    """The newest release is read on every command (its hierarchies name a cross-tab's
    cells). Asked for release 1 only, a cached copy reads release 2 with the labels kept
    beside the verdict: its table is not decoded, and its hierarchies are those read from it."""
    cache = tmp_path / "verdicts"
    full = reader.open_releases(fresh)
    reader.open_releases(fresh, cache_dir=cache)
    one = reader.open_releases(fresh, cache_dir=cache, releases=[1])
    newest = one.releases[-1]
    assert newest.number == 2 and newest.sources.data is None, "the newest release's table was decoded"
    assert newest.sources.content is not None, "its verified bytes wait to be decoded when read"
    assert {q: h.labels for q, h in newest.hierarchies.items()} == {
        q: h.labels for q, h in full.releases[-1].hierarchies.items()
    }
    assert newest.records == len(full.releases[-1].data)
    pd.testing.assert_frame_equal(newest.data, full.releases[-1].data)  # decoded when asked for


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda entry: _flip(entry, 100),
        lambda entry: entry.with_suffix(".sha256").unlink(),
        lambda entry: _forge_arrays(entry, {"records": np.array([1, 2])}),  # not one number
        lambda entry: _forge_arrays(entry, {"records": np.array(2.5)}),  # not a whole number
    ],
)
def test_a_corrupt_or_forged_labels_entry_is_ignored_and_made_afresh(
    fresh: Path, tmp_path: Path, corrupt: Callable[[Path], None]
) -> None:
    cache = tmp_path / "verdicts"
    full = reader.open_releases(fresh)
    reader.open_releases(fresh, cache_dir=cache)
    corrupt(next(p for p in _labels(cache) if ".labels-0002." in p.name))
    again = reader.open_releases(fresh, cache_dir=cache, releases=[1])
    assert again.releases[-1].sources.data is not None, "release 2 was read from a corrupt entry"
    assert {q: h.labels for q, h in again.releases[-1].hierarchies.items()} == {
        q: h.labels for q, h in full.releases[-1].hierarchies.items()
    }
    third = reader.open_releases(fresh, cache_dir=cache, releases=[1])
    assert third.releases[-1].sources.data is None, "the labels were not kept again"
