"""Register versions (serialpub/io/versions.py; docs/design.md section 10): every version a
release used is rebuilt byte for byte from its delta chain, checked against its sha256,
and costs bytes per changed line, not per line."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from serialpub.errors import InputError
from serialpub.io import versions
from serialpub.io.versions import FULL_EVERY, RegisterVersions, _delta_ops, _join, _lines, _whole


def _keep(folder: Path, data: bytes) -> tuple[str, int]:
    path = folder / "register.csv"
    path.write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    return sha, RegisterVersions(folder).keep(path, sha)


@given(st.binary(max_size=200).map(lambda b: b.replace(b"\r", b"")) | st.sampled_from([b"", b"\n", b"a", b"a\r\nb"]))
def test_lines_and_join_are_inverse(data: bytes) -> None:
    assert _join(_lines(data)) == data


edits = st.lists(
    st.tuples(
        st.sampled_from(["drop", "insert", "change", "same"]), st.integers(0, 10**6), st.text("ab,1", max_size=5)
    ),
    max_size=12,
)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(st.lists(edits, min_size=1, max_size=20), st.booleans())
def test_every_version_rebuilds_byte_for_byte(
    tmp_path_factory: pytest.TempPathFactory, series: list[list[tuple[str, int, str]]], crlf: bool
) -> None:
    """Random edits of a register file, version after version (past a full copy's interval):
    each version, read in any order by a fresh reader, is the file as it was."""
    folder = tmp_path_factory.mktemp("versions")
    end = "\r\n" if crlf else "\n"
    lines = [f"id,x{end}"] + [f"{i},{i % 3}{end}" for i in range(30)]
    kept: list[tuple[str, bytes]] = []
    for n, step in enumerate(series):
        for op, at, text in step:
            i = at % max(len(lines), 1)
            if op == "drop" and len(lines) > 1:
                lines.pop(i)
            elif op == "insert":
                lines.insert(i, f"n{n}{text}{end}")
            elif op == "change" and lines:
                lines[i] = lines[i].rstrip(end) + text + end
        data = "".join(lines).encode()
        sha, _ = _keep(folder, data)
        kept.append((sha, data))
    for sha, data in reversed(kept):
        assert RegisterVersions(folder).read_bytes(sha) == data
    reader = RegisterVersions(folder)
    for sha, data in kept:
        assert reader.read_bytes(sha) == data


def test_a_version_costs_its_changed_lines(tmp_path: Path) -> None:
    lines = [b"id,age\n"] + [f"{i},{20 + i % 50}\n".encode() for i in range(20_000)]
    _, first_bytes = _keep(tmp_path, b"".join(lines))
    for i in range(1, 20_000, 100):  # 200 changed lines of 20,000
        lines[i] = lines[i][:-1] + b"1\n"
    _, delta = _keep(tmp_path, b"".join(lines))
    assert delta < first_bytes / 10
    assert delta < 200 * 40 + 4_000  # a few dozen bytes per changed line, plus the file's overhead
    assert _keep(tmp_path, b"".join(lines))[1] == 0  # the same content is kept once


def test_chains_are_cut_by_full_copies(tmp_path: Path) -> None:
    base = [f"{i},{i}\n".encode() for i in range(50)]
    shas = []
    for n in range(FULL_EVERY + 3):
        shas.append(_keep(tmp_path, b"".join([*base, f"v{n}\n".encode()]))[0])
    versions = RegisterVersions(tmp_path)
    assert len(versions.chain_files(shas[FULL_EVERY - 1])) == FULL_EVERY
    assert len(versions.chain_files(shas[FULL_EVERY])) == 1  # stored whole
    (tmp_path / "registers" / ".tip.arrow").unlink()  # the cache only saves time
    sha, _ = _keep(tmp_path, b"".join(base))
    assert RegisterVersions(tmp_path).read_bytes(sha) == b"".join(base)


def test_an_altered_or_missing_version_is_named(tmp_path: Path) -> None:
    one, _ = _keep(tmp_path, b"id,x\n1,a\n2,b\n")
    two, _ = _keep(tmp_path, b"id,x\n1,a\n2,c\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    forged, _ = _keep(elsewhere, b"id,x\n1,z\n2,b\n")  # a whole version of other content
    RegisterVersions(tmp_path).path(one).write_bytes(RegisterVersions(elsewhere).path(forged).read_bytes())
    with pytest.raises(InputError, match="does not rebuild to the register with sha256"):
        RegisterVersions(tmp_path).read_bytes(one)
    RegisterVersions(tmp_path).path(one).unlink()
    with pytest.raises(InputError, match="register version missing"):
        RegisterVersions(tmp_path).read_bytes(two)  # its parent is gone
    with pytest.raises(InputError, match="changed while it was being read"):
        (tmp_path / "register.csv").write_bytes(b"id,x\n")
        RegisterVersions(tmp_path).keep(tmp_path / "register.csv", "0" * 64)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.binary(max_size=6).map(lambda b: b.replace(b"\n", b"") + b"\n"), max_size=30), st.booleans())
def test_a_whole_version_is_the_delta_from_no_parent(lines: list[bytes], cut: bool) -> None:
    """A version stored whole is built without the delta's lookup and copy: the same table
    (hence the same Parquet bytes) as the delta from an empty parent."""
    data = b"".join(lines)
    data = data[:-1] if cut and data else data  # a file without a final newline
    child = _lines(data)
    assert _whole(child).equals(_delta_ops(pa.array([], pa.large_binary()), child))


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.binary(max_size=9).map(lambda b: b.replace(b"\n", b"") + b"\n"), max_size=25),
    st.booleans(),
    st.integers(1, 12),
    st.booleans(),
)
def test_a_whole_version_is_stored_block_by_block(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], cut: bool, block: int, from_bytes: bool
) -> None:
    """A version stored whole is read and written ``_BLOCK`` bytes at a time (blocks here
    of one to twelve bytes, shorter than some lines): its file holds the table of :func:`_whole`
    over every line, its tip every line, and it rebuilds the file; the newline search by
    blocks finds what one search over the whole finds. ``from_bytes``: a register given as
    bytes (Parquet or SQL source) rather than read from its file."""
    data = b"".join(lines)
    data = data[:-1] if cut and data else data  # a file without a final newline
    folder = tmp_path_factory.mktemp("whole")
    path = folder / "register.csv"
    path.write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(versions, "_BLOCK", block)
        assert versions._line_ends(np.frombuffer(data, dtype=np.uint8)).tolist() == [
            i + 1 for i, b in enumerate(data) if b == 10
        ]
        kept = RegisterVersions(folder)
        kept.keep(path, sha, data if from_bytes else None)
    stored = pq.read_table(kept.path(sha))
    assert stored.combine_chunks().equals(_whole(_lines(data)).combine_chunks())
    assert kept._meta(sha) == {"sha256": sha, "parent": "", "depth": "0", "lines": str(len(_lines(data)))}
    tip = kept._tip(sha)
    assert tip is not None and tip.equals(_lines(data))
    assert RegisterVersions(folder).read_bytes(sha) == data
    stored_files = sorted(p.name for p in (folder / "registers").iterdir())
    assert stored_files == sorted([".tip.arrow", "latest", f"{sha}.parquet"])


def test_a_whole_version_read_changed_leaves_nothing(tmp_path: Path) -> None:
    """Bytes that do not hash to the sha256 the release recorded are not stored, and no
    temporary file is left (the version is written as it is read, then checked)."""
    path = tmp_path / "register.csv"
    path.write_bytes(b"id,x\n1,a\n" * 1000)
    with pytest.MonkeyPatch.context() as mp, pytest.raises(InputError, match="changed while it was being read"):
        mp.setattr(versions, "_BLOCK", 64)
        RegisterVersions(tmp_path).keep(path, "0" * 64)
    assert list((tmp_path / "registers").iterdir()) == []
