"""Commands that check what was published: the independent audit, the state's
verification, and the state database's schema."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from serialpub.cli.app import app, console


@app.command()
def audit(
    workspace: Annotated[Path, typer.Argument(help="workspace folder (register.csv, hierarchies/, releases/)")],
    dataset: Annotated[str | None, typer.Option("--dataset", help="dataset name if there are several")] = None,
    snapshots: Annotated[
        Path | None,
        typer.Option(
            "--snapshots",
            help="folder with snapshot-<period>.csv of every release: the data holder's exact, mechanism-aware audit",
        ),
    ] = None,
    public_key: Annotated[
        Path | None,
        typer.Option(
            "--public-key",
            help="the publisher's public key (keys/*.pub): every manifest must be signed with it (or a key a "
            "key-rotation record hands over to); without it the first signed release's key is pinned",
        ),
    ] = None,
    since: Annotated[
        int | None,
        typer.Option("--since", help="a release you saw: it must still be here, and every later release chain to it"),
    ] = None,
    manifest_sha256: Annotated[
        str | None, typer.Option("--manifest-sha256", help="the sha256 of --since's manifest.json as you saw it")
    ] = None,
    checkpoint: Annotated[
        Path | None,
        typer.Option(
            "--checkpoint",
            help="a checkpoint.json you kept (checkpoint.sig beside it): the copy must extend the release it names",
        ),
    ] = None,
    key_fingerprint: Annotated[
        str | None,
        typer.Option(
            "--key-fingerprint",
            help="the publisher's key fingerprint (SHA256:..., obtained from the publisher): the series' key with it "
            "is taken as --public-key; a series with no such key fails",
        ),
    ] = None,
    learners: Annotated[
        str,
        typer.Option(
            "--learners",
            help="the learning adversary's learners to report above the verdict line: all, nb, none, or names "
            "joined by commas (nb, nb-em3, nb-em10, logistic-pairs); reported, they do not change the verdict",
        ),
    ] = "all",
) -> None:
    """Recompute every breach probability from the register, hierarchies and published files
    alone (not the state). Exit 0: PASS; 1: FAIL (a violation, overlapping regions or
    tampering: a missing release, a broken manifest chain, a file that does not match its
    checksum, a signature that does not verify); 5: NOT VERIFIABLE from these files (presence
    known: pairs exceed 1/ℓ only on the upper bound, --snapshots decides); 6: PASS, with an
    accepted known breach (partition model parts or the paper's suppression model). With
    --snapshots, also count the records each release did not publish (an adversary who
    knows the algorithm can infer them) and, under presence, only the present individuals.
    With --since/--manifest-sha256 or --checkpoint, also fail a copy that does not extend
    the series you saw (rolled back, truncated or rewritten). After the verdict, a learning
    adversary's posteriors (--learners; with --snapshots, how often they are right)."""
    from serialpub.analysis.audit import audit_workspace, format_report
    from serialpub.analysis.audit.learner_report import format_learners
    from serialpub.analysis.audit.learners import learner_names
    from serialpub.errors import InputError

    if (since is None) != (manifest_sha256 is None):
        raise InputError("--since and --manifest-sha256 go together: the release number and its manifest's sha256")
    pin = None if since is None or manifest_sha256 is None else (since, manifest_sha256)
    names = learner_names(learners)
    result = audit_workspace(
        workspace,
        dataset,
        snapshots=snapshots,
        public_key=public_key,
        since=pin,
        checkpoint=checkpoint,
        key_fingerprint=key_fingerprint,
        learners=names,
    )
    # the learners' table goes above the verdict line, which stays the output's last line
    # (the one a reader or a script looks at; the exit status says the same)
    findings, verdict = format_report(result).rstrip("\n").rsplit("\n", 1)
    console.print(findings)
    if result.learners is not None:
        console.print(format_learners(result.learners), markup=False, highlight=False)
    console.print(verdict)
    status = result.verdict.exit_status  # docs/commands.md, "Exit codes"
    if status:
        raise typer.Exit(status)


@app.command()
def keygen(
    out: Annotated[Path, typer.Option("--out", help="the private key file to write; the public key gets .pub")],
) -> None:
    """Create the publisher's Ed25519 key pair: the private key (mode 0600; name it as
    signing_key in serialpub.yaml, keep it out of the release store), the public key to
    hand to data users ('serialpub audit --public-key') and its fingerprint, which they
    pin ('--key-fingerprint')."""
    from serialpub.analysis.audit.integrity import read_public_key
    from serialpub.analysis.audit.keys import fingerprint
    from serialpub.io.signing import create_key_pair

    public = create_key_pair(out)
    console.print(
        f"private key: {out} (keep it secret)\npublic key: {public} (give it to data users)\n"
        f"fingerprint: {fingerprint(read_public_key(public))} (publish it apart from the releases, where data users "
        "can check it: they pin it with --key-fingerprint)",
        soft_wrap=True,
    )


@app.command("rotate-key")
def rotate_key(
    new_key: Annotated[
        Path, typer.Option("--new-key", help="the new private key file (made with its .pub if it does not exist)")
    ],
    reason: Annotated[str, typer.Option("--reason", help="why the key changes (recorded in the signed record)")] = "",
    config: Annotated[Path, typer.Option("--config", help="serialpub.yaml or its folder")] = Path("."),
) -> None:
    """Change the publisher's signing key from the next release on: write
    key-rotation-NNNN.json beside the releases, signed by the old (configured) key, and set
    signing_key in serialpub.yaml to the new key. 'serialpub audit' pins the first signed
    release's key and accepts another only through such a record. Run by the account that
    holds both keys; running it again after an interruption finishes the switch."""
    from serialpub.config import load_config
    from serialpub.workflow.dataset_series import DatasetSeries
    from serialpub.workflow.publishing import recover
    from serialpub.workflow.series_integrity import rotate_key as rotate

    series = DatasetSeries(load_config(config))
    recover(series)
    done = rotate(series, new_key, reason)
    console.print(
        f"{done.record}: the signing key changes from {done.old_key} to {done.new_key} at release "
        f"{done.from_release}; serialpub.yaml now names {new_key}. Give data users {done.new_public_key_file} and "
        "ship the record with the releases ('serialpub public-copy' does)",
        soft_wrap=True,
    )


db_app = typer.Typer(help="The state database.", no_args_is_help=True)
app.add_typer(db_app, name="db")


@db_app.command("upgrade")
def db_upgrade(
    config: Annotated[Path, typer.Option("--config", help="serialpub.yaml or its folder")] = Path("."),
) -> None:
    """Migrate the state database to the schema this serialpub needs (back it up first)."""
    from serialpub.config import load_config
    from state.engine import create, masked, upgrade

    ws = load_config(config)
    before, after = upgrade(create(ws.database_url))
    console.print(f"{masked(ws.database_url)}: schema {before or 'empty'} -> {after}", soft_wrap=True)


state_app = typer.Typer(help="The statistics file (the state) of a dataset.", no_args_is_help=True)
app.add_typer(state_app, name="state")


@state_app.command("verify")
def state_verify(
    config: Annotated[Path, typer.Option("--config", help="serialpub.yaml or its folder")] = Path("."),
) -> None:
    """Rebuild the state from the register, the hierarchies and the published releases and
    compare it with the database; exit 1 on any difference or unverifiable pair."""
    from serialpub.analysis.verify import verify_state
    from serialpub.config import load_config

    report = verify_state(load_config(config))
    console.print(report.format(), markup=False, highlight=False)
    if not report.ok:
        raise typer.Exit(1)
