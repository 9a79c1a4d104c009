"""What each published manifest binds, checked for ``serialpub state verify``
(docs/compliance.md, "What the publication checks"): its settings and figures against the
release row the state database recorded at drafting, and every evidence file it lists
(``report.html``, ``report.json``, ``validation.json``, ``validation.html``) against its
sha256.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from serialpub.analysis.verify.report import VerifyReport
from serialpub.analysis.verify.stored import DbRelease
from serialpub.io.manifest import Manifest
from state.params import SETTINGS


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def compare_fields(report: VerifyReport, manifests: Mapping[int, Manifest], rows: Mapping[int, DbRelease]) -> None:
    """Add to ``report`` each manifest field that is not what the release's row recorded:
    the settings drafting recorded in ``params`` (rows made before a setting was recorded
    are not compared on it) and the record and group counts. The row is read as stored,
    not through :class:`state.params.DraftParams`: a row edited by hand, even with a value
    of the wrong type, is reported, not refused."""
    for seq, manifest in manifests.items():
        row = rows.get(seq)
        if row is None or manifest.imported:
            continue
        data = manifest.to_dict()
        expected: dict[str, Any] = {key: row.params[key] for key in SETTINGS if key in row.params}
        expected |= {"records": row.records, "groups": row.groups}
        for key, value in expected.items():
            if data.get(key) != value:
                report.add(
                    "manifest fields",
                    f"release {seq}: manifest field '{key}' is {_show(data.get(key))}, the state database recorded "
                    f"{_show(value)}",
                )


def check_evidence(report: VerifyReport, manifests: Mapping[int, Manifest], folders: Mapping[int, Path]) -> None:
    """Add to ``report`` each evidence file a manifest lists that is missing or does not
    match its sha256 (a folder holding none of them is a copy without the evidence, and
    only noted)."""
    for seq, manifest in manifests.items():
        listed = manifest.evidence_checksums()
        folder = folders[seq]
        absent = [name for name in listed if not (folder / name).is_file()]
        if listed and len(absent) == len(listed):
            report.notes.append(f"release {seq}: the evidence ({', '.join(absent)}) is not in {folder}")
            continue
        for name, sha in listed.items():
            path = folder / name
            if not path.is_file():
                report.add("evidence", f"release {seq}: {path} is missing; the manifest lists it (sha256)")
                continue
            with path.open("rb") as f:
                if hashlib.file_digest(f, "sha256").hexdigest() != sha:
                    report.add("evidence", f"release {seq}: {path} does not match the manifest's sha256")
