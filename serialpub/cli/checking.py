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
            "--public-key", help="the publisher's public key (keys/*.pub): every manifest must be signed with it"
        ),
    ] = None,
) -> None:
    """Recompute every breach probability from the register, hierarchies and published files
    alone (not the state); exit 1 on any violation, overlapping regions or tampering (a
    missing release, a broken manifest chain, a file that does not match its checksum, a
    signature that does not verify). With --snapshots, also count the records each release
    did not publish (an adversary who knows the algorithm can infer them) and, under
    presence, only the present individuals."""
    from serialpub.analysis.audit import audit_workspace, format_report

    result = audit_workspace(workspace, dataset, snapshots=snapshots, public_key=public_key)
    console.print(format_report(result))
    if not result.ok:
        raise typer.Exit(1)


@app.command()
def keygen(
    out: Annotated[Path, typer.Option("--out", help="the private key file to write; the public key gets .pub")],
) -> None:
    """Create the publisher's Ed25519 key pair: the private key (mode 0600; name it as
    signing_key in serialpub.yaml, keep it out of the release store) and the public key
    to hand to data users ('serialpub audit --public-key')."""
    from serialpub.io.signing import create_key_pair

    public = create_key_pair(out)
    console.print(f"private key: {out} (keep it secret)\npublic key: {public} (give it to data users)")


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
