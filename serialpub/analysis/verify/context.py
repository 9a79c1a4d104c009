"""What one ``serialpub state verify`` run works with (docs/design.md sections 4 and 9).

:class:`Verification` holds the workspace's register and hierarchies, read once, with their
sha256, the writer side's region geometry over the register (:mod:`anonymizer.regions`), the
state store (read-only) and the report being filled; :class:`Rebuild` is the statistics
state rebuilt from the releases read so far. :mod:`.rebuild`, :mod:`.compare` and
:mod:`.series` share them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from anonymizer.hierarchy import Hierarchy
from anonymizer.regions import NodeSpans, RegisterCombos
from anonymizer.release import History
from serialpub.analysis.verify.report import VerifyReport
from serialpub.config import Workspace
from serialpub.io import release_files
from serialpub.io.hierarchies import read_hierarchies
from serialpub.io.inputs import Register, load_register
from state.store import StateStore, open_engine

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass
class Rebuild:
    """The state rebuilt so far, plus per class and value whether it is uncertain."""

    history: History
    unknown: BoolArray  # (K, V)


class Verification:
    """The inputs of one verification, read once, and the report it fills.

    Raises (on construction):
        InputError: the register or a hierarchy file is missing or malformed.
        StateError: the state database cannot be opened.
    """

    def __init__(self, ws: Workspace) -> None:
        cfg = ws.config
        self.ws = ws
        self.qis = list(cfg.quasi_identifiers)
        self.hierarchies: dict[str, Hierarchy] = read_hierarchies(ws.hierarchy_dir, self.qis)
        self.register: Register = load_register(ws.register_path, cfg.id_column, self.qis, self.hierarchies)
        self.store = StateStore(open_engine(ws.database_url))
        self.report = VerifyReport(dataset=cfg.dataset)
        self.spans = [NodeSpans.of(self.hierarchies[q]) for q in self.qis]
        self.combos = RegisterCombos.of(self.register.keys, [self.hierarchies[q] for q in self.qis])
        self.register_sha = release_files.sha256_file(ws.register_path)
        self.hierarchy_sha = {q: release_files.sha256_file(ws.hierarchy_dir / f"{q}.csv") for q in self.qis}
