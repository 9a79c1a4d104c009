"""Independent audit of a published release series: recompute every breach probability.

The auditor reads only what an outsider has: the population register, the generalization
hierarchies and the published release directories (``data.parquet`` + ``manifest.json``,
docs/release-contract.md). It never reads the statistics file. For every register
individual o and protected value s it recomputes

    p(o, s) = 1 - Π_j (1 - n_{j,s} / n_j)

over the releases j in which o is a candidate of a group holding s (paper 004, Lemma 4;
docs/design.md section 1), decides ``p > 1/ℓ`` exactly (:func:`anonymizer.privacy.exceeds_threshold`),
and checks that the regions of each release are pairwise disjoint, that every published
label belongs to its hierarchy and that ``data.parquet`` is the file the manifest names.

Candidates of a group G with region R (the box of its nodes' leaf sets):

- dilution ``register``: the register individuals whose QI values lie in R; ``n_j`` is
  their number.
- dilution ``presence``: ``n_j`` is the number of G's records; without the snapshots the
  auditor cannot tell who was present, so every register individual in R is taken as
  linked. This can only overestimate p (docs/release-contract.md). Only where R holds no
  more register individuals than G has records were all of them present; those links
  alone give a lower bound. A pair above 1/ℓ on the lower bound fails the audit; above it
  on the upper bound only, the verdict is NOT VERIFIABLE (docs/threat-model.md).

Cost. Individuals with the same QI values share every factor, so all work is on the
distinct register QI combinations ("cells", with their counts), never on individuals or
records one by one: a release maps cells to groups by a sort-merge join on the nodes of
the attributes whose used nodes form a cut (the normal case: serialpub's anonymizer
recodes globally), and tests containment only on the other attributes. Memory and time
grow with (distinct cells) x (protected values) x (releases).

Independence. The audit keeps its own region geometry (:mod:`.geometry`) and imports
neither the writer side's :mod:`anonymizer.regions` nor the search, the state, the
workflow, ``serialpub state verify`` or the validation checks, so that a bug in shared
geometry cannot both make and pass a release (docs/design.md section 9; import-linter
contracts in ``pyproject.toml``).

Modules: :mod:`.files` reads a workspace (:func:`audit_workspace`); :mod:`.manifest` the
manifest keys; :mod:`.cells` the register and snapshots as QI combinations;
:mod:`.recompute` one release; :mod:`.series` the series and its figures
(:func:`audit_releases`); :mod:`.result` the outcome, its typed :class:`Verdict` (PASS,
PASS with an accepted known breach, NOT VERIFIABLE from the audited files, FAIL; each with
its exit status) and :func:`format_report`;
:mod:`.learners` (with :mod:`.logistic` and :mod:`.learner_report`) the learning
adversary's posteriors, reported beside the verdict;
:mod:`.integrity` the tamper evidence of the store, with :mod:`.keys` (the pinned key and
its rotation records), :mod:`.extension` (checkpoints: does the copy extend what a
consumer saw) and :mod:`.signature` (one Ed25519 signature).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from serialpub.analysis.audit.files import audit_workspace
    from serialpub.analysis.audit.result import (
        EXIT_STATUS,
        MAX_LISTED_OVERLAPS,
        AuditResult,
        Outcome,
        RegionOverlap,
        Verdict,
        collapse_notes,
        format_report,
    )
    from serialpub.analysis.audit.series import audit_releases

__all__ = [
    "EXIT_STATUS",
    "MAX_LISTED_OVERLAPS",
    "AuditResult",
    "Outcome",
    "RegionOverlap",
    "Verdict",
    "audit_releases",
    "audit_workspace",
    "collapse_notes",
    "format_report",
]

#: the module each name of the package comes from, imported when the name is first asked
#: for: a data user's reader imports a few of the audit's modules (the checks of a copy),
#: not the whole series audit
_HOME = {name: "result" for name in __all__} | {"audit_workspace": "files", "audit_releases": "series"}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
