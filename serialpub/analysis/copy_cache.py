"""What a verified public copy leaves in the data user's cache folder: the key of its
state, and the arrays its releases resolve to (docs/data-users.md, "The verification
cache").

:func:`copy_state` is the key of a copy's verdict (:mod:`serialpub.io.verdict_cache`): the
sha256 of the key the signatures are checked against, of every file the verification reads
and of the code that verifies and resolves. Under the same key, :class:`ArrayStore` keeps
what answering a query costs beyond the verdict: the register coded as its distinct QI
combinations (cells, with their individuals) and, per release, the groups resolved against
it (:class:`anonymizer.joint.JointRelease`), the distinct labels of its numeric
quasi-identifiers (the nodes a numeric QI is read with, :func:`anonymizer.intervals.extend_hierarchy`)
and its number of records; and, for every release of a verified copy, those labels and
records alone (a release read but not resolved, such as the newest one that names a
cross-tab's cells, is then not decoded). A copy state whose verdict is in the cache answers from these
without reading its register or decoding its tables. Any changed byte of the copy, another
key or another version of this code is another key: its arrays are never read for it.
An entry that is not intact, not of the shapes the release's manifest and hierarchies
imply, is a miss and the arrays are resolved afresh.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

import anonymizer
from anonymizer.hierarchy import Hierarchy
from anonymizer.intervals import extend_hierarchy
from anonymizer.joint import GroupValueCounts, JointRelease
from serialpub.io import verdict_cache

__all__ = ["ArrayStore", "Resolved", "copy_state"]

_HERE = Path(__file__).parent
_ANONYMIZER = Path(anonymizer.__file__).parent
_IO = Path(verdict_cache.__file__).parent

#: the files whose code decides a verdict or the arrays cached with it: a change to any of
#: them is another key
CODE_FILES = (
    _HERE / "reader.py",
    Path(__file__),
    *sorted((_HERE / "audit").glob("*.py")),
    *(_IO / f for f in ("manifest.py", "names.py", "verdict_cache.py", "register_cache.py")),
    *(_ANONYMIZER / f for f in ("hierarchy.py", "hierarchy_index.py", "intervals.py", "regions.py", "joint.py")),
    _ANONYMIZER / "arrays.py",
)


@functools.cache
def _code_digest() -> list[str]:
    """The sha256 of each of :data:`CODE_FILES`, read once per process: the code that runs
    is the code imported, whatever happens to the files afterwards."""
    return sorted(verdict_cache.files_digest(Path("/"), [p.resolve() for p in CODE_FILES]).values())


def copy_state(
    root: Path,
    dataset: str,
    dirs: list[tuple[int, Path]],
    contents: dict[int, bytes] | None,
    key_text: str | None,
    pinned: str | None,
    id_column: str,
    digests: dict[str, str] | None = None,
) -> str | None:
    """The cache key of the copy's state (:func:`serialpub.io.verdict_cache.verdict_key`):
    the key given (its text and a pinned fingerprint), the dataset, the id column, the sha256
    of every file under ``releases/<dataset>/``, ``hierarchies/``, ``hierarchy-versions/``,
    ``registers/``, ``keys/`` and of ``register.csv`` with their paths (so an added, removed
    or renamed file changes it too), and of the verifying code (:data:`CODE_FILES`).
    ``contents``: the bytes of each release's ``data.parquet`` already read (hashed from
    them, not read again). ``digests``, when given, receives the sha256 of every file by its
    path relative to ``root`` (so that no caller hashes a file twice). None when a file
    cannot be read (no cache then)."""
    try:
        files = [p for p in (root / "releases" / dataset).rglob("*") if p.is_file()]
        for sub in ("hierarchies", "hierarchy-versions", "registers", "keys"):
            if (root / sub).is_dir():
                files += [p for p in (root / sub).rglob("*") if p.is_file()]
        if (root / "register.csv").is_file():
            files.append(root / "register.csv")
        known = {(d / "data.parquet"): contents[n] for n, d in dirs} if contents is not None else {}
        hashed = verdict_cache.files_digest(root, [p for p in files if p not in known])
        hashed.update({p.relative_to(root).as_posix(): hashlib.sha256(b).hexdigest() for p, b in known.items()})
        code = _code_digest()
    except (OSError, ValueError):
        return None
    if digests is not None:
        digests.update(hashed)
    return verdict_cache.verdict_key(
        kind="public copy",
        key=key_text,
        pinned=pinned,
        dataset=dataset,
        id_column=id_column,
        files=sorted(hashed.items()),
        code=code,
    )


IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class Resolved:
    """One release's cached arrays: the fields of :class:`anonymizer.joint.JointRelease`
    but its hierarchies (``group_nodes`` (G, d), ``nonzero`` (the (G, V) counts by their
    nonzero entries), ``cell_leaves`` (C, d),
    ``cell_counts`` (C,), ``group_of_cell`` (C,), ``sensitive_values`` (V,)), ``labels``:
    per numeric QI its distinct published labels in order of first appearance, and
    ``records``: the release's records."""

    group_nodes: IntArray
    nonzero: GroupValueCounts
    cell_leaves: IntArray
    cell_counts: IntArray
    group_of_cell: IntArray
    sensitive_values: tuple[str, ...]
    labels: dict[str, list[str]]
    records: int

    def joint(self, qis: list[str], hierarchies: list[Hierarchy], suppressed: int) -> JointRelease | None:
        """The :class:`~anonymizer.joint.JointRelease` these arrays are of, read with
        ``hierarchies`` (one per QI of ``qis``); None when an id is no node, leaf or group of
        them (an entry of another copy state: a miss)."""
        nodes = np.array([h.n_nodes for h in hierarchies], dtype=np.int64)
        leaves = np.array([h.n_leaves for h in hierarchies], dtype=np.int64)
        groups = self.group_nodes.shape[0]
        if not (
            _within(self.group_nodes, 0, nodes)
            and _within(self.cell_leaves, 0, leaves)
            and _within(self.group_of_cell, -1, groups)
        ):
            return None
        return JointRelease(
            tuple(qis),
            tuple(hierarchies),
            self.sensitive_values,
            self.group_nodes,
            self.nonzero,
            self.cell_leaves,
            self.cell_counts,
            self.group_of_cell,
            suppressed,
        )


def _within(a: IntArray, low: int, high: int | IntArray) -> bool:
    """Whether every entry of ``a`` lies in [low, high) (``high`` per column of a 2-d ``a``)."""
    return a.size == 0 or (int(a.min()) >= low and bool((a.max(axis=0) < high).all()))


def _register_name(leaves: IntArray, counts: IntArray) -> str:
    """A coded register's entry name: the sha256 of its arrays, so releases that share it
    share one entry."""
    digest = hashlib.sha256(np.ascontiguousarray(leaves).tobytes())
    digest.update(str(leaves.shape).encode())
    digest.update(np.ascontiguousarray(counts).tobytes())
    return f"register-{digest.hexdigest()[:32]}"


@dataclass(eq=False)
class ArrayStore:
    """The cached arrays of one copy state.

    Attributes:
        folder: the cache folder (:func:`serialpub.io.verdict_cache.user_cache_dir`).
        key: the copy state's key (:func:`copy_state`), whose verdict is in ``folder``.
        unchanged: whether the copy still hashes to ``key``; asked before each write, so
            that arrays resolved from files changed meanwhile are never kept under it.
    """

    folder: Path
    key: str
    unchanged: Callable[[], bool]
    registers: dict[str, tuple[IntArray, IntArray]] = field(default_factory=dict, repr=False)

    def load(self, number: int, qis: list[str], numeric: list[str]) -> Resolved | None:
        """The arrays of release ``number`` (QIs ``qis``, numeric QIs ``numeric``), None when
        they are not cached or not of the shapes those imply (a miss)."""
        entry = verdict_cache.load_arrays(self.folder, self.key, f"release-{number:04d}")
        names = {"group_nodes", "count_at", "count", "group_of_cell", "values", "register", "records"}
        if entry is None or not names <= set(entry):
            return None
        name = str(entry["register"])
        if name not in self.registers:
            coded = verdict_cache.load_arrays(self.folder, self.key, name)
            if coded is None or {"cell_leaves", "cell_counts"} - set(coded):
                return None
            self.registers[name] = (coded["cell_leaves"], coded["cell_counts"])
        leaves, cell_counts = self.registers[name]
        labels = {q: [str(v) for v in entry[f"labels-{q}"]] for q in numeric if f"labels-{q}" in entry}
        nodes, at, count, of_cell = entry["group_nodes"], entry["count_at"], entry["count"], entry["group_of_cell"]
        d, g, v = len(qis), nodes.shape[0] if nodes.ndim == 2 else -1, entry["values"].size
        shaped = (
            all(a.dtype == np.int64 for a in (nodes, at, count, of_cell, leaves, cell_counts))
            and nodes.shape == (g, d)
            and at.ndim == 1
            and count.shape == at.shape
            and bool((count > 0).all())
            # nonzero entries in row-major order, each within (G, V): the table they fill is whole
            and (at.size == 0 or (int(at[0]) >= 0 and int(at[-1]) < g * v and bool((np.diff(at) > 0).all())))
            and leaves.ndim == 2
            and leaves.shape[1] == d
            and cell_counts.shape == of_cell.shape == (leaves.shape[0],)
            and len(labels) == len(numeric)
            and entry["records"].shape == ()
            and entry["values"].dtype.kind == "U"
        )
        if not shaped:
            return None
        nonzero = GroupValueCounts.of_flat(at, count, (g, v))
        values = tuple(str(x) for x in entry["values"])
        return Resolved(nodes, nonzero, leaves, cell_counts, of_cell, values, labels, int(entry["records"]))

    def read(
        self,
        number: int,
        qis: list[str],
        numeric: list[str],
        suppressed: int,
        declared: Mapping[str, Hierarchy],
        extended: dict[object, Hierarchy],
    ) -> tuple[dict[str, Hierarchy], JointRelease | None, int] | None:
        """Release ``number``'s hierarchies (``declared``, one per QI of ``qis``, the numeric
        QIs' extended by their cached labels; ``extended`` holds those made for earlier
        releases, by declared hierarchy and labels), its resolution (None when it was read
        but not resolved before) and its records; None when neither is cached or they do not
        fit those hierarchies (a miss)."""
        resolved = self.load(number, qis, numeric)
        held = (resolved.labels, resolved.records) if resolved is not None else self.load_labels(number, numeric)
        if held is None:
            return None
        read_with = dict(declared)
        try:
            for q in numeric:  # one step per numeric QI
                key = (id(declared[q]), tuple(held[0][q]))
                if key not in extended:
                    extended[key] = extend_hierarchy(declared[q], held[0][q])
                read_with[q] = extended[key]
        except (KeyError, ValueError):
            return None
        if resolved is None:
            return read_with, None, held[1]
        joint = resolved.joint(qis, [read_with[q] for q in qis], suppressed)
        return None if joint is None else (read_with, joint, held[1])

    def load_labels(self, number: int, numeric: list[str]) -> tuple[dict[str, list[str]], int] | None:
        """The distinct labels of release ``number``'s numeric QIs ``numeric`` and its records,
        as :meth:`save_labels` kept them; None when they are not cached or not of that shape
        (a miss)."""
        entry = verdict_cache.load_arrays(self.folder, self.key, f"labels-{number:04d}")
        names = ["records", *(f"labels-{q}" for q in numeric)]
        if entry is None or any(name not in entry for name in names):
            return None
        records, arrays = entry["records"], [entry[f"labels-{q}"] for q in numeric]
        if records.shape != () or records.dtype != np.int64 or any(a.ndim != 1 or a.dtype.kind != "U" for a in arrays):
            return None
        return {q: [str(v) for v in a] for q, a in zip(numeric, arrays, strict=True)}, int(records)

    def save_labels(self, number: int, labels: Mapping[str, list[str]], records: int) -> None:
        """Keep the distinct ``labels`` of release ``number``'s numeric QIs (in order of first
        appearance) and its ``records``: what reading it with its hierarchies needs, so that a
        release not resolved (the newest, whose hierarchies name a cross-tab's cells) is not
        decoded on every command. Unlike :meth:`save`, no second hash of the copy is needed:
        they are read from the very bytes of its ``data.parquet`` that were hashed into
        :attr:`key`, whatever happened to the file since."""
        arrays = {f"labels-{q}": np.array(v, dtype=str) for q, v in labels.items()}
        verdict_cache.save_arrays(
            self.folder, self.key, f"labels-{number:04d}", {**arrays, "records": np.array(records, dtype=np.int64)}
        )

    def save(self, number: int, joint: JointRelease, labels: Mapping[str, list[str]], records: int) -> None:
        """Keep release ``number``'s resolution ``joint``, the distinct ``labels`` of its
        numeric QIs and its ``records``, when the copy still hashes to :attr:`key`."""
        if not self.unchanged():
            return
        name = _register_name(joint.cell_leaves, joint.cell_counts)
        if name not in self.registers:
            coded = {"cell_leaves": joint.cell_leaves, "cell_counts": joint.cell_counts}
            if not verdict_cache.save_arrays(self.folder, self.key, name, coded):
                return
            self.registers[name] = (joint.cell_leaves, joint.cell_counts)
        # the counts by their nonzero entries, as the release holds them: the dense (G, V)
        # table would be hundreds of times larger, read and hashed on every command
        nonzero = joint.nonzero
        at = nonzero.rows * nonzero.shape[1] + nonzero.column
        arrays = {
            "group_nodes": joint.group_nodes,
            "count_at": at.astype(np.int64),
            "count": nonzero.count.astype(np.int64),
            "group_of_cell": joint.group_of_cell,
            "values": np.array(joint.sensitive_values, dtype=str),
            "register": np.array(name),
            "records": np.array(records, dtype=np.int64),
            **{f"labels-{q}": np.array(v, dtype=str) for q, v in labels.items()},
        }
        verdict_cache.save_arrays(self.folder, self.key, f"release-{number:04d}", arrays)
