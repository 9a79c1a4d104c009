"""The public copy of a dataset's release store: what data consumers receive.

A release folder holds the release (``data.parquet``, ``manifest.json``, ``manifest.sig``)
and the evidence (reports and validation results). The evidence holds figures computed
from the raw snapshot, which an adversary who knows the algorithm could use to tell
possible worlds apart, so it stays with the publisher (docs/release-contract.md, "What the
public receives"; docs/threat-model.md). This module copies the release files only, with
what a reader needs to interpret and check them: the hierarchies, the publisher's public
key and, on request, the register, and a README.md that says what each file is and how
to verify and query them.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from serialpub.config import Config
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
#: the copy's own description, at its top (``serialpub audit`` reads only ``releases/`` and the
#: files the manifests name, so it does not count it as a finding)
README_FILE = "README.md"


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
    ``hierarchy-versions/``; docs/design.md section 10), and ``README.md``
    (:func:`readme_text`). Running it again adds the releases published since and replaces
    ``register.csv``, ``hierarchies/`` and ``README.md`` by today's; a release file already
    in the copy is never rewritten.

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
    registered = with_register or (out / "register.csv").is_file()  # an earlier run's stays
    readme = readme_text(ws.config, [r.seq for r in published], public_key_name(plan), registered)
    plan, current = plan + records, [*current, *checkpoint, (readme.encode("utf-8"), out / README_FILE)]
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


def public_key_name(plan: list[tuple[Path, Path]]) -> str | None:
    """The name of the public key file a copy's ``plan`` puts into ``keys/``, or None."""
    return next((target.name for _, target in plan if target.parent.name == "keys"), None)


def readme_text(config: Config, releases: list[int], key_file: str | None, with_register: bool) -> str:
    """The public copy's README.md (Markdown) for the dataset of ``config`` holding
    ``releases``: what each file is, how to install the reader, verify, query and expand,
    and to pin the publisher's key (docs/data-users.md). It names no fingerprint: one read
    from the copy proves nothing, the data user obtains it from the publisher apart."""
    dataset, qis = config.dataset, ", ".join(config.quasi_identifiers)
    held = f"releases {releases[0]}-{releases[-1]}" if releases else "no release yet"
    rows = [
        f"| `releases/{dataset}/release-NNNN/data.parquet` | a release: one row per published record, the "
        "quasi-identifiers generalized, the sensitive value exact |",
        f"| `releases/{dataset}/release-NNNN/manifest.json`, `manifest.sig` | what the release is (parameters, "
        "checksums, the previous manifest's hash) and the publisher's signature of it |",
        f"| `releases/{dataset}/checkpoint.json`, `.sig`, `key-rotation-*` | the newest release the publisher "
        "vouches for, and the hand-overs to a new signing key |",
        "| `hierarchies/<qi>.csv`, `hierarchy-versions/` | how each quasi-identifier is generalized, and the "
        "version each release used |",
    ]
    if with_register:
        rows.append("| `register.csv`, `registers/` | the population register, and the versions the releases used |")
    if key_file is not None:
        rows.append(f"| `keys/{key_file}` | the publisher's public key |")
    register = (
        ""
        if with_register
        else (
            "\nThis copy holds no register: `query`, `expand` and `audit` need the publisher's `register.csv` "
            "(and `registers/`) in this folder.\n"
        )
    )
    pin = "--key-fingerprint SHA256:..."
    return f"""# Public copy of the release series '{dataset}' ({held})

Anonymized releases published by serialpub under the global guarantee: over all releases,
nobody is linked to a protected sensitive value with probability above 1/ℓ. The
quasi-identifiers are {qis}; the sensitive attribute is {config.sensitive}. Written by
`serialpub public-copy`, which replaces this file whenever it updates the copy.

| path | what it is |
|---|---|
{chr(10).join(rows)}
{register}
## Install the reader

    python3 -m venv reader && reader/bin/pip install ./serialpub

where `./serialpub` stands for a clone of serialpub's repository or the wheel the publisher
hands out. This installs what verifies, queries and expands a copy, without the
publisher's packages.

## Verify, query, expand

    reader/bin/serialpub audit . {pin}
    reader/bin/serialpub query . {pin} --where "{config.quasi_identifiers[0]}=VALUE"
    reader/bin/serialpub expand . {pin} --out tables

`query` and `expand` refuse a copy whose signatures, manifest chain or checksums do not
verify; `audit` also recomputes every breach probability.

## Pin the publisher's key

`SHA256:...` is the fingerprint of the publisher's key. Obtain it from the publisher apart
from this copy (their web page, a letter, a call), never from this folder: whoever rewrites
the copy can rewrite `keys/` and this file too. With it, a copy signed by another key is
refused. Without it, the commands verify against `keys/*.pub` and print that key's
fingerprint: compare it with the publisher's before you trust an answer.

More: "Using the releases (data users)" in serialpub's documentation (docs/data-users.md).
"""
