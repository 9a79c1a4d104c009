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
and its number of records. A copy state whose verdict is in the cache answers from these
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
from anonymizer.joint import JointRelease
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
) -> str | None:
    """The cache key of the copy's state (:func:`serialpub.io.verdict_cache.verdict_key`):
    the key given (its text and a pinned fingerprint), the dataset, the id column, the sha256
    of every file under ``releases/<dataset>/``, ``hierarchies/``, ``hierarchy-versions/``,
    ``registers/``, ``keys/`` and of ``register.csv`` with their paths (so an added, removed
    or renamed file changes it too), and of the verifying code (:data:`CODE_FILES`).
    ``contents``: the bytes of each release's ``data.parquet`` already read (hashed from
    them, not read again). None when a file cannot be read (no cache then)."""
    try:
        files = [p for p in (root / "releases" / dataset).rglob("*") if p.is_file()]
        for sub in ("hierarchies", "hierarchy-versions", "registers", "keys"):
            if (root / sub).is_dir():
                files += [p for p in (root / sub).rglob("*") if p.is_file()]
        if (root / "register.csv").is_file():
            files.append(root / "register.csv")
        known = {(d / "data.parquet"): contents[n] for n, d in dirs} if contents is not None else {}
        digests = verdict_cache.files_digest(root, [p for p in files if p not in known])
        digests.update({p.relative_to(root).as_posix(): hashlib.sha256(b).hexdigest() for p, b in known.items()})
        code = _code_digest()
    except (OSError, ValueError):
        return None
    return verdict_cache.verdict_key(
        kind="public copy",
        key=key_text,
        pinned=pinned,
        dataset=dataset,
        id_column=id_column,
        files=sorted(digests.items()),
        code=code,
    )


IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class Resolved:
    """One release's cached arrays: the fields of :class:`anonymizer.joint.JointRelease`
    but its hierarchies (``group_nodes`` (G, d), ``counts`` (G, V), ``cell_leaves`` (C, d),
    ``cell_counts`` (C,), ``group_of_cell`` (C,), ``sensitive_values`` (V,)), ``labels``:
    per numeric QI its distinct published labels in order of first appearance, and
    ``records``: the release's records."""

    group_nodes: IntArray
    counts: IntArray
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
            self.counts,
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
        if entry is None or not {"group_nodes", "counts", "group_of_cell", "values", "register", "records"} <= set(
            entry
        ):
            return None
        name = str(entry["register"])
        if name not in self.registers:
            coded = verdict_cache.load_arrays(self.folder, self.key, name)
            if coded is None or {"cell_leaves", "cell_counts"} - set(coded):
                return None
            self.registers[name] = (coded["cell_leaves"], coded["cell_counts"])
        leaves, cell_counts = self.registers[name]
        labels = {q: [str(v) for v in entry[f"labels-{q}"]] for q in numeric if f"labels-{q}" in entry}
        nodes, counts, of_cell = entry["group_nodes"], entry["counts"], entry["group_of_cell"]
        d, g = len(qis), nodes.shape[0] if nodes.ndim == 2 else -1
        shaped = (
            all(a.dtype == np.int64 for a in (nodes, counts, of_cell, leaves, cell_counts))
            and nodes.shape == (g, d)
            and counts.shape == (g, entry["values"].size)
            and leaves.ndim == 2
            and leaves.shape[1] == d
            and cell_counts.shape == of_cell.shape == (leaves.shape[0],)
            and len(labels) == len(numeric)
            and entry["records"].shape == ()
            and entry["values"].dtype.kind == "U"
        )
        if not shaped:
            return None
        values = tuple(str(v) for v in entry["values"])
        return Resolved(nodes, counts, leaves, cell_counts, of_cell, values, labels, int(entry["records"]))

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
        arrays = {
            "group_nodes": joint.group_nodes,
            "counts": joint.counts,
            "group_of_cell": joint.group_of_cell,
            "values": np.array(joint.sensitive_values, dtype=str),
            "register": np.array(name),
            "records": np.array(records, dtype=np.int64),
            **{f"labels-{q}": np.array(v, dtype=str) for q, v in labels.items()},
        }
        verdict_cache.save_arrays(self.folder, self.key, f"release-{number:04d}", arrays)
