"""The public copy of a dataset's release store: what data consumers receive.

A release folder holds the release (``data.parquet``, ``manifest.json``, ``manifest.sig``)
and the evidence (reports and validation results). The evidence holds figures computed
from the raw snapshot, which an adversary who knows the algorithm could use to tell
possible worlds apart, so it stays with the publisher (docs/release-contract.md, "What the
public receives"; docs/threat-model.md). This module copies the release files only, with
what a reader needs to interpret and check them: the hierarchies, the publisher's public
key and, on request, the register.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from serialpub.errors import InputError
from serialpub.io import release_files, signing, versions
from serialpub.io.manifest import Manifest
from serialpub.workflow import series_integrity
from serialpub.workflow.dataset_inputs import read_dataset_inputs
from serialpub.workflow.dataset_series import DatasetSeries
from serialpub.workflow.preflight import check_signatures
from serialpub.workflow.publishing import check_published_files

#: the files of a release folder that the public receives (the signature when there is one)
RELEASE_FILES = (release_files.DATA_FILE, release_files.MANIFEST_FILE, signing.SIGNATURE_FILE)


@dataclass(frozen=True)
class PublicCopy:
    """What :func:`write_public_copy` did: the releases now in the copy, and how many files
    it wrote (files already there with the same bytes are left alone)."""

    releases: list[int]
    written: int


def write_public_copy(series: DatasetSeries, out: Path, with_register: bool = False) -> PublicCopy:
    """Copy every published release of the dataset into ``out`` as the public receives it:
    ``releases/<dataset>/release-NNNN/{data.parquet, manifest.json, manifest.sig}``, plus
    ``hierarchies/`` and ``keys/<signing key>.pub`` (when the workspace signs), and
    ``register.csv`` with ``with_register`` (what ``serialpub audit`` needs), with the
    register and hierarchy versions the releases used (``registers/``,
    ``hierarchy-versions/``; docs/design.md section 10). Running it again adds the releases
    published since and replaces ``register.csv`` and ``hierarchies/`` by today's; a
    release file already in the copy is never rewritten.

    Raises:
        StateError: a published release's files no longer match the state, or its manifest's
            signature or chain link does not verify (nothing is copied).
        InputError: ``out`` is inside the workspace, a hierarchy file serialpub cannot read
            (as :func:`serialpub.workflow.dataset_inputs.read_dataset_inputs`), or a file in
            the copy differs from the release's (a published release is never rewritten):
            named, nothing more written.
    """
    ws = series.ws
    out = out.resolve()
    if out == ws.root.resolve() or ws.root.resolve() in out.parents:
        raise InputError(f"{out}: the public copy must be outside the workspace {ws.root}; choose another --out")
    read_dataset_inputs(ws)  # the hierarchies go to the public as they are: only ones serialpub reads
    published = series.store.published(ws.config.dataset)
    check_published_files(series, published)  # never hand out files the state does not vouch for
    check_signatures(series, published, "nothing was copied")  # nor a signature a consumer's audit fails
    plan: list[tuple[Path, Path]] = []
    for r in published:
        name = release_files.release_name(r.seq)
        for file in RELEASE_FILES:
            source = ws.dataset_dir / name / file
            if source.is_file():
                plan.append((source, out / "releases" / ws.config.dataset / name / file))
    # the register and hierarchy versions each release used (docs/design.md section 10):
    # content-addressed, so a copy already there is the same file
    kept = versions.RegisterVersions(ws.root)
    for r in published:
        manifest = Manifest.read(ws.dataset_dir / release_files.release_name(r.seq) / release_files.MANIFEST_FILE)
        for q, sha in manifest.sha256.hierarchies.items():
            path = versions.hierarchy_version(ws.root, q, sha)
            if path.is_file():
                versions.check_hierarchy_version(path, sha)  # never hand out an altered copy
                plan.append((path, out / path.relative_to(ws.root)))
        sha = manifest.sha256.register_file
        if with_register and kept.has(sha):
            plan += [(path, out / path.relative_to(ws.root)) for path in kept.chain_files(sha)]
    # today's register and hierarchies replace the copy's: they change from period to period
    current = [(path.read_bytes(), out / "hierarchies" / path.name) for path in sorted(ws.hierarchy_dir.glob("*.csv"))]
    if with_register:  # a register in a database is copied in its canonical CSV form (serialpub.io.sources)
        register = ws.register_source.read_bytes("population register", ws.config.id_column)
        current.append((register, out / "register.csv"))
    key = ws.signing_key_path
    public_key = None if key is None else key.with_suffix(".pub")  # never the private key itself
    if public_key is not None and public_key != key and public_key.is_file():
        plan.append((public_key, out / "keys" / public_key.name))
    records, checkpoint = series_integrity.public_files(ws.dataset_dir, out / "releases" / ws.config.dataset)
    plan, current = plan + records, current + checkpoint
    plan = list(dict.fromkeys(plan))
    for source, target in plan:  # check every file before writing any
        if target.is_file() and target.read_bytes() != source.read_bytes():
            raise InputError(
                f"{target}: differs from {source}; a public copy is never rewritten, so start a new one "
                "with another --out"
            )
    written = 0
    for source, target in plan:
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            written += 1
    for content, target in current:
        if not target.is_file() or target.read_bytes() != content:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
            written += 1
    return PublicCopy([r.seq for r in published], written)
