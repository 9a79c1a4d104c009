"""The data user's commands: ``query`` and ``expand`` on a public copy (docs/data-users.md).

Both open the copy with :func:`serialpub.analysis.reader.open_releases`, which verifies
every signature, the manifest chain and every file's checksum first and refuses a tampered
or incomplete copy with one line (exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.table import Table

from serialpub.cli.app import app, console, split_list
from serialpub.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

    from serialpub.analysis.reader import PublicReleases

_COPY = typer.Argument(help="the public copy (serialpub public-copy --with-register) or a workspace folder")
_DATASET = typer.Option("--dataset", help="dataset name if there are several")
_KEY = typer.Option("--public-key", help="the publisher's public key (default: the copy's one keys/*.pub)")
_FINGERPRINT = typer.Option(
    "--key-fingerprint",
    help="the publisher's key fingerprint (SHA256:..., obtained from the publisher): a copy signed by another key "
    "is refused, whatever its keys/*.pub holds",
)


def _verified(releases: PublicReleases) -> str:
    """What was verified, naming the key: the line a data user compares with the
    publisher's fingerprint."""
    n = len(releases.releases)
    if releases.key_fingerprint is None:
        return f"Verified: {n} release(s), manifest chain; not signed, so nothing shows whose they are"
    return (
        f"Verified: {n} release(s), manifest chain and signatures by key {releases.key_fingerprint} "
        f"({releases.key_source})"
    )


def _releases(text: str) -> list[int] | None:
    if text.strip().lower() == "all":
        return None
    try:
        numbers = [int(x) for x in split_list(text)]
    except ValueError:
        raise InputError(f"--release {text!r}: give a release number, several separated by commas, or 'all'") from None
    if not numbers:
        raise InputError("--release: give a release number, several separated by commas, or 'all'")
    return numbers


@app.command()
def query(
    copy: Annotated[Path, _COPY],
    where: Annotated[
        list[str] | None,
        typer.Option(
            "--where",
            help="a condition QI=VALUE: a leaf or hierarchy node, several joined by '|', or a range [lo,hi], "
            ">=lo, <=hi on numeric values; repeat for AND",
        ),
    ] = None,
    sensitive: Annotated[
        str | None, typer.Option("--sensitive", help="sensitive values counted, comma-separated (default: all)")
    ] = None,
    release: Annotated[str, typer.Option("--release", help="a release number, several (1,3) or 'all'")] = "all",
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False,
    dataset: Annotated[str | None, _DATASET] = None,
    public_key: Annotated[Path | None, _KEY] = None,
    key_fingerprint: Annotated[str | None, _FINGERPRINT] = None,
) -> None:
    """Count the records satisfying the conditions, per release: the register-joint
    estimate with its standard error and nominal 90 % interval, bounds the true count
    cannot leave, and paper 001's uniform estimate."""
    from serialpub.analysis.querying import ERROR_MODEL, answer, parse_condition
    from serialpub.analysis.reader import open_releases

    numbers = _releases(release)
    releases = open_releases(copy, dataset, public_key, key_fingerprint=key_fingerprint)
    attributes = releases.releases[-1].qis
    conditions = [parse_condition(w, attributes) for w in where or []]
    values = None if sensitive is None else split_list(sensitive)
    table = answer(releases, conditions, values, numbers)
    note = _bias_note(table)
    if as_json:
        print(json.dumps({
            "dataset": releases.dataset, "where": [str(c) for c in conditions], "sensitive": values,
            "key_fingerprint": releases.key_fingerprint, "error_model": ERROR_MODEL, "note": note,
            "answers": table.to_dict(orient="records"),
        }, indent=2))  # fmt: skip
        return
    described = " AND ".join(str(c) for c in conditions) or "every record"
    out = Table(
        title=f"{releases.dataset}: COUNT WHERE {described}"
        + (f" AND {releases.releases[-1].sensitive} IN ({', '.join(values)})" if values else ""),
        box=box.SIMPLE_HEAD,
        caption=(
            "estimate: each group's published counts spread over its region like the register's individuals; "
            "se: its standard error if each group's records were held by individuals of its region drawn at "
            "random (the estimate's own model; not its bias); 90 % interval: estimate ± 1.645 se within the "
            "bounds; lower-upper: certain bounds of the true count; uniform: spread uniformly over the leaves "
            "(paper 001). " + _verified(releases)
        ),
        caption_justify="left",
    )
    for col in ("release", "period", "estimate", "se", "90 % interval", "lower", "upper", "uniform", "records"):
        out.add_column(col, justify="right")
    for row in table.itertuples():
        out.add_row(
            str(row.release), str(row.period), f"{row.estimate:.1f}", f"{row.se:.1f}",
            f"{row.low90:.1f}-{row.high90:.1f}", str(row.lower), str(row.upper), f"{row.uniform:.1f}",
            str(row.records),
        )  # fmt: skip
    console.print(out)
    if note:
        console.print(f"Note: {note}.", soft_wrap=True)


def _bias_note(table: pd.DataFrame) -> str | None:
    """The warning a query on a generalized QI gets: the QIs named, and what the error
    figure leaves out (docs/data-users.md, "How far to trust the error figure")."""
    cut = sorted({q for text in table["generalized"] if text for q in text.split(",")}) if len(table) else []
    if not cut:
        return None
    releases = int((table["generalized"] != "").sum())
    return (
        f"the condition on {', '.join(cut)} cuts generalized values in {releases} of {len(table)} release(s); "
        "there the estimate assumes the values counted are spread inside each region like the register's "
        "individuals, so where they depend on that QI it leans toward independence (too low where they "
        "concentrate, too high where they are rare) and the se does not include that bias"
    )


@app.command()
def expand(
    copy: Annotated[Path, _COPY],
    out: Annotated[Path, typer.Option("--out", help="folder to write release-NNNN.parquet into")],
    release: Annotated[str, typer.Option("--release", help="a release number, several (1,3) or 'all'")] = "all",
    dataset: Annotated[str | None, _DATASET] = None,
    public_key: Annotated[Path | None, _KEY] = None,
    key_fingerprint: Annotated[str | None, _FINGERPRINT] = None,
) -> None:
    """Write each release as weighted microdata: one row per (register QI combination inside
    a published region, sensitive value) with its expected records ('weight'); SUM(weight)
    over a query's rows is its register-joint estimate."""
    from serialpub.analysis.querying import write_expanded
    from serialpub.analysis.reader import open_releases

    numbers = _releases(release)
    releases = open_releases(copy, dataset, public_key, key_fingerprint=key_fingerprint)
    written = write_expanded(releases, out, numbers)
    console.print(f"{len(written)} table(s) written to {out}. {_verified(releases)}", soft_wrap=True)
