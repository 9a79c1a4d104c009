"""What one ``serialpub state verify`` run works with (docs/design.md sections 4, 9 and 10).

:class:`Verification` reads the register and hierarchies each release used (the workspace's
files or their kept versions), with the writer side's region geometry over them
(:mod:`anonymizer.regions`), and holds the state store (read-only) and the report being
filled; :class:`Rebuild` is the statistics state rebuilt from the releases read so far.
:mod:`.rebuild`, :mod:`.compare` and :mod:`.series` share them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from anonymizer.hierarchy import Hierarchy
from anonymizer.hierarchy_index import HierarchyIndex
from anonymizer.regions import RegisterCells
from anonymizer.release import History
from serialpub.analysis.verify.report import VerifyReport
from serialpub.config import Workspace
from serialpub.errors import InputError
from serialpub.io import release_files
from serialpub.io.hierarchies import read_hierarchies, read_hierarchy
from serialpub.io.inputs import Register, load_register_version, read_csv, register_from_table
from serialpub.io.versions import check_hierarchy_version, hierarchy_version, sha256_bytes
from state.store import StateStore, open_engine

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass
class Rebuild:
    """The state rebuilt so far, plus per class and value whether it is uncertain."""

    history: History
    unknown: BoolArray  # (K, V)


@dataclass(frozen=True)
class ReleaseInputs:
    """The register and QI hierarchies one release used, read from the workspace's files or
    its kept versions (:mod:`serialpub.io.versions`), with the writer side's geometry over
    them and the position of every register row among the series' individuals."""

    register: Register
    hierarchies: dict[str, Hierarchy]
    spans: list[HierarchyIndex]
    cells: RegisterCells
    in_series: IntArray


class Verification:
    """The inputs of one verification, read once, and the report it fills.

    The series' individuals (``ids``) are everyone in any register a release used, in the
    order they first appear, and then the current register's newcomers: the rebuilt state
    is kept over them (docs/design.md section 10).

    Raises (on construction):
        InputError: the register or a hierarchy file is missing or malformed.
        StateError: the state database cannot be opened.
    """

    def __init__(self, ws: Workspace) -> None:
        cfg = ws.config
        self.ws = ws
        self.qis = list(cfg.quasi_identifiers)
        self.store = StateStore(open_engine(ws.database_url))
        self.report = VerifyReport(dataset=cfg.dataset)
        read_hierarchies(ws.hierarchy_dir, self.qis)  # a missing or malformed file is named now
        # the register as its source gives it now (a file or a database table,
        # serialpub.io.sources), hashed as drafting hashes it
        self._register_content: bytes | None = ws.register_source.read_bytes("population register", cfg.id_column)
        self.register_sha = sha256_bytes(self._register_content)
        self.hierarchy_sha = {q: release_files.sha256_file(ws.hierarchy_dir / f"{q}.csv") for q in self.qis}
        self.ids = pd.Index(np.empty(0, dtype=object))
        self._last: tuple[tuple[str, tuple[str, ...]], ReleaseInputs] | None = None
        self.current = self.inputs(self.register_sha, self.hierarchy_sha)

    def inputs(self, register_sha: str, hierarchy_sha: dict[str, str]) -> ReleaseInputs:
        """The register and hierarchies with these sha256 (the last ones asked for are kept).

        Raises:
            InputError: a version is neither the workspace's file nor kept (named).
        """
        key = (register_sha, tuple(hierarchy_sha.get(q, "") for q in self.qis))
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        cfg = self.ws.config
        hierarchies: dict[str, Hierarchy] = {}
        for q in self.qis:
            current = self.ws.hierarchy_dir / f"{q}.csv"
            path = current if hierarchy_sha.get(q) == self.hierarchy_sha.get(q) else None
            if path is None:
                path = hierarchy_version(self.ws.root, q, hierarchy_sha.get(q, ""))
                if not path.is_file():
                    raise InputError(f"{current}: not the hierarchy the release used, and {path} is missing")
                check_hierarchy_version(path, hierarchy_sha.get(q, ""))
            hierarchies[q] = read_hierarchy(path, q)
        if register_sha == self.register_sha:
            label = self.ws.register_source.label
            content = self._register_content
            if content is None:
                content = self.ws.register_source.read_bytes("population register", cfg.id_column)
            self._register_content = None  # read again if asked again (rare): the bytes are large
            table = read_csv(label, "population register", content)
            register = register_from_table(table, label, cfg.id_column, self.qis, hierarchies)
        else:
            # InputError when missing or altered
            register = load_register_version(self.ws.root, register_sha, cfg.id_column, self.qis, hierarchies)
        ids = pd.Index(register.ids.astype(str))
        pos = np.asarray(self.ids.get_indexer(ids), dtype=np.int64)
        new = pos < 0
        if new.any():
            pos[new] = len(self.ids) + np.arange(int(new.sum()))
            self.ids = self.ids.append(ids[new])
        found = ReleaseInputs(
            register,
            hierarchies,
            [hierarchies[q].index for q in self.qis],
            RegisterCells.of(register.keys, [hierarchies[q] for q in self.qis]),
            pos,
        )
        self._last = (key, found)
        return found
