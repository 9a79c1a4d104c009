"""The data user's commands: ``query`` and ``expand`` on a public copy (docs/data-users.md).

Both open the copy with :func:`serialpub.analysis.reader.open_releases`, which verifies
every signature, the manifest chain and every file's checksum first and refuses a tampered
or incomplete copy with one line (exit 2). A copy verified once is not verified again while
its files, the key and the checking code are byte for byte the same: its verdict waits in
the user's cache folder (:mod:`serialpub.io.verdict_cache`; ``--no-cache`` verifies anyway,
``--cache-dir`` or ``SERIALPUB_CACHE_DIR`` moves it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from serialpub.cli.app import app, console, split_list
from serialpub.errors import InputError

if TYPE_CHECKING:
    from serialpub.analysis.reader import PublicReleases

_COPY = typer.Argument(help="the public copy (serialpub public-copy --with-register) or a workspace folder")
_DATASET = typer.Option("--dataset", help="dataset name if there are several")
_KEY = typer.Option("--public-key", help="the publisher's public key (default: the copy's one keys/*.pub)")
_FINGERPRINT = typer.Option(
    "--key-fingerprint",
    help="the publisher's key fingerprint (SHA256:..., obtained from the publisher): a copy signed by another key "
    "is refused, whatever its keys/*.pub holds",
)

_NO_CACHE = typer.Option(
    "--no-cache", help="verify the whole copy even if it was verified before, and leave no verdict in the cache"
)
_CACHE_DIR = typer.Option(
    "--cache-dir",
    help="the folder of verification verdicts (default: $SERIALPUB_CACHE_DIR, else $XDG_CACHE_HOME/serialpub, "
    "else ~/.cache/serialpub); never inside the copy",
)


def _cache(no_cache: bool, cache_dir: Path | None) -> Path | None:
    """The verdict folder :func:`serialpub.analysis.reader.open_releases` reads and writes,
    None with ``--no-cache``."""
    from serialpub.io.verdict_cache import user_cache_dir

    if no_cache:
        return None
    return cache_dir if cache_dir is not None else user_cache_dir()


def _verified(releases: PublicReleases) -> str:
    """What was verified, naming the key: the line a data user compares with the
    publisher's fingerprint."""
    n = releases.verified or len(releases.releases)
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


_CAPTION = (
    "estimate: each group's published counts spread over its region like the register's individuals; "
    "se: its standard error if each group's records were held by individuals of its region drawn at "
    "random (the estimate's own model; not its bias); 90 % interval: estimate ± 1.645 se within the "
    "bounds; lower-upper: certain bounds of the true count; uniform: spread uniformly over the leaves "
    "(paper 001). "
)


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
    by: Annotated[
        str | None,
        typer.Option("--by", help="cross-tab: one count per combination of these QIs' values (comma-separated)"),
    ] = None,
    queries: Annotated[
        Path | None,
        typer.Option("--queries", help="a file of queries, one a line: conditions as for --where joined by ' AND '"),
    ] = None,
    release: Annotated[str, typer.Option("--release", help="a release number, several (1,3) or 'all'")] = "all",
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False,
    dataset: Annotated[str | None, _DATASET] = None,
    public_key: Annotated[Path | None, _KEY] = None,
    key_fingerprint: Annotated[str | None, _FINGERPRINT] = None,
    no_cache: Annotated[bool, _NO_CACHE] = False,
    cache_dir: Annotated[Path | None, _CACHE_DIR] = None,
) -> None:
    """Count the records satisfying the conditions, per release: the register-joint
    estimate with its standard error and nominal 90 % interval, bounds the true count
    cannot leave, and paper 001's uniform estimate. With --by, one count per cell of a
    cross-tab; with --queries, one per line of a file; the copy is verified once."""
    from serialpub.analysis.batch import query_lines
    from serialpub.analysis.reader import open_releases

    numbers = _releases(release)
    if queries is not None and (where or by is not None):
        raise InputError("--queries: write each line's conditions in the file; --where and --by do not combine with it")
    lines = query_lines(queries) if queries is not None else None
    releases = open_releases(
        copy,
        dataset,
        public_key,
        key_fingerprint=key_fingerprint,
        cache_dir=_cache(no_cache, cache_dir),
        releases=numbers,
    )
    values = None if sensitive is None else split_list(sensitive)
    if lines is not None and queries is not None:
        _batch(releases, queries, lines, values, numbers, as_json)
    elif by is not None:
        _crosstab(releases, split_list(by), where or [], values, numbers, as_json)
    else:
        _single(releases, where or [], values, numbers, as_json)


def _single(
    releases: PublicReleases, where: list[str], values: list[str] | None, numbers: list[int] | None, as_json: bool
) -> None:
    from serialpub.analysis.querying import ERROR_MODEL, Query, answer_columns, parse_condition

    attributes = releases.releases[-1].qis
    conditions = [parse_condition(w, attributes) for w in where]
    query = Query(tuple(conditions), None if values is None else tuple(values))
    # the answer's columns as plain values, the rows of answer()'s table: a single query
    # does not import pandas
    columns = {c: a.tolist() for c, a in answer_columns(releases, [query], numbers).items() if c != "query"}
    rows = [dict(zip(columns, row, strict=True)) for row in zip(*columns.values(), strict=True)]
    note = _bias_note(columns["generalized"])
    if as_json:
        print(
            json.dumps(
                {
                    "dataset": releases.dataset,
                    "where": [str(c) for c in conditions],
                    "sensitive": values,
                    "key_fingerprint": releases.key_fingerprint,
                    "error_model": ERROR_MODEL,
                    "note": note,
                    "answers": rows,
                },
                indent=2,
            )
        )
        return
    out = _table(f"{releases.dataset}: COUNT WHERE {_described(releases, conditions, values)}", releases)
    for col in ("release", "period", "estimate", "se", "90 % interval", "lower", "upper", "uniform", "records"):
        out.add_column(col, justify="right")
    for row in (SimpleNamespace(**r) for r in rows):
        out.add_row(str(row.release), str(row.period), *_figures(row), f"{row.uniform:.1f}", str(row.records))
    _print(out, note)


def _table(title: str, releases: PublicReleases) -> Table:
    """An answer table titled with the query; title and caption are plain text, not rich markup."""
    return Table(
        title=Text(title),
        box=box.SIMPLE_HEAD,
        caption=Text(_CAPTION + _verified(releases)),
        caption_justify="left",
    )


def _print(out: Table, note: str | None) -> None:
    """Prints an answer table and its note with rich markup off: a query's values, labels and
    file names are data, and a cell such as ``[x]`` must print as written, not vanish as a tag."""
    console.print(out, markup=False)
    if note:
        console.print(f"Note: {note}.", soft_wrap=True, markup=False)


def _described(releases: PublicReleases, conditions: Sequence[object], values: Sequence[str] | None) -> str:
    """A query as its title writes it: ``a=x AND b=y AND s IN (v, w)``."""
    text = " AND ".join(str(c) for c in conditions) or "every record"
    return text + (f" AND {releases.releases[-1].sensitive} IN ({', '.join(values)})" if values else "")


def _figures(row: Any) -> list[str]:
    """estimate, se, 90 % interval, lower, upper of an answer row, as the tables print them."""
    return [
        f"{row.estimate:.1f}", f"{row.se:.1f}", f"{row.low90:.1f}-{row.high90:.1f}", str(row.lower), str(row.upper)
    ]  # fmt: skip


def _crosstab(
    releases: PublicReleases,
    by: list[str],
    where: list[str],
    values: list[str] | None,
    numbers: list[int] | None,
    as_json: bool,
) -> None:
    """``query --by``: one row per (cell, release), the cells' queries answered together."""
    import pandas as pd

    from serialpub.analysis.batch import crosstab_queries
    from serialpub.analysis.querying import ERROR_MODEL, answers, parse_condition

    newest = releases.releases[-1]
    conditions = [parse_condition(w, newest.qis) for w in where]
    leaves = {q: newest.hierarchies[q].leaves for q in newest.qis}
    cells, cell_queries = crosstab_queries(by, leaves, conditions, values)
    table = answers(releases, cell_queries, numbers)
    table = pd.concat([cells.iloc[table["query"]].reset_index(drop=True), table.drop(columns="query")], axis=1)
    note = _bias_note(list(table["generalized"]), "answers")
    if as_json:
        print(
            json.dumps(
                {
                    "dataset": releases.dataset,
                    "by": list(cells.columns),
                    "where": [str(c) for c in conditions],
                    "sensitive": values,
                    "key_fingerprint": releases.key_fingerprint,
                    "error_model": ERROR_MODEL,
                    "note": note,
                    "cells": table.to_dict(orient="records"),
                },
                indent=2,
            )
        )
        return
    described = _described(releases, conditions, values)
    out = _table(f"{releases.dataset}: COUNT BY {', '.join(cells.columns)} WHERE {described}", releases)
    for col in (*cells.columns, "release", "period", "estimate", "se", "90 % interval", "lower", "upper"):
        out.add_column(col, justify="left" if col in cells.columns else "right")
    for row in table.itertuples(index=False):
        out.add_row(*(str(v) for v in row[: cells.shape[1]]), str(row.release), str(row.period), *_figures(row))
    _print(out, note)


def _batch(
    releases: PublicReleases,
    path: Path,
    lines: list[tuple[int, str]],
    values: list[str] | None,
    numbers: list[int] | None,
    as_json: bool,
) -> None:
    """``query --queries FILE``: one row per (line, release), every line answered together.
    Its rows are built from the answers' columns without pandas (whose import alone was about
    half a second of a warm 5,000-query batch)."""
    import numpy as np

    from serialpub.analysis.batch import parse_queries
    from serialpub.analysis.querying import ERROR_MODEL, answer_columns

    newest = releases.releases[-1]
    batch = parse_queries(path, lines, newest.qis, newest.sensitive, values)
    answered = answer_columns(releases, batch, numbers)
    position = answered.pop("query")
    text = np.array([_described(releases, q.conditions, q.sensitive) for q in batch], dtype=object)
    columns = {
        "line": np.array([n for n, _ in lines])[position].tolist(),
        "query": text[position].tolist(),
        **{c: a.tolist() for c, a in answered.items()},
    }
    note = _bias_note(columns["generalized"], "answers")
    if as_json:
        rows = [dict(zip(columns, row, strict=True)) for row in zip(*columns.values(), strict=True)]
        print(
            json.dumps(
                {
                    "dataset": releases.dataset,
                    "queries": str(path),
                    "key_fingerprint": releases.key_fingerprint,
                    "error_model": ERROR_MODEL,
                    "note": note,
                    "answers": rows,
                },
                indent=2,
            )
        )
        return
    out = _table(f"{releases.dataset}: {len(batch)} queries of {path}", releases)
    for col in ("line", "query", "release", "period", "estimate", "se", "90 % interval", "lower", "upper"):
        out.add_column(col, justify="left" if col == "query" else "right")
    for values_ in zip(*columns.values(), strict=True):  # one table row per answer
        row = SimpleNamespace(**dict(zip(columns, values_, strict=True)))
        out.add_row(str(row.line), str(row.query), str(row.release), str(row.period), *_figures(row))
    _print(out, note)


def _bias_note(generalized: Sequence[str], unit: str = "release(s)") -> str | None:
    """The warning a query on a generalized QI gets: the QIs named, and what the error
    figure leaves out (docs/data-users.md, "How far to trust the error figure").
    ``generalized``: the answers' column of that name."""
    cut = sorted({q for text in generalized if text for q in text.split(",")})
    if not cut:
        return None
    cutting = sum(1 for text in generalized if text)
    return (
        f"the condition on {', '.join(cut)} cuts generalized values in {cutting} of {len(generalized)} {unit}; "
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
    no_cache: Annotated[bool, _NO_CACHE] = False,
    cache_dir: Annotated[Path | None, _CACHE_DIR] = None,
) -> None:
    """Write each release as weighted microdata: one row per (register QI combination inside
    a published region, sensitive value) with its expected records ('weight'); SUM(weight)
    over a query's rows is its register-joint estimate."""
    from serialpub.analysis.querying import in_no_region, write_expanded
    from serialpub.analysis.reader import open_releases

    numbers = _releases(release)
    releases = open_releases(
        copy,
        dataset,
        public_key,
        key_fingerprint=key_fingerprint,
        cache_dir=_cache(no_cache, cache_dir),
        releases=numbers,
    )
    written = write_expanded(releases, out, numbers)
    console.print(f"{len(written)} table(s) written to {out}. {_verified(releases)}", soft_wrap=True, markup=False)
    chosen = releases.releases if numbers is None else [releases.release(n) for n in numbers]
    absent = [(r.number, in_no_region(r), r.manifest.suppressed or 0) for r in chosen]  # one step per release
    console.print(_absent_note(absent), soft_wrap=True, markup=False)


def _absent_note(counts: list[tuple[int, int, int]]) -> str:
    """What ``expand`` says of the register individuals its tables leave out: per release
    (number, individuals in no published region, records suppressed), why none of them has
    a row (docs/threat-model.md, "What a release reveals about presence")."""
    outside = [(n, k, s) for n, k, s in counts if k]
    if not outside:
        return "Every register individual lies in a published region of every release written."
    listed = ", ".join(f"release {n}: {k:,}" for n, k, _ in outside)
    suppressed = [n for n, _, s in outside if s]
    return (
        f"Register individuals in no published region, so in no row: {listed}. Each region holds all the "
        "snapshot's records of its individuals, so these were not in that period's snapshot"
        + (
            f" (or, in release(s) {', '.join(map(str, suppressed))}, among the records it suppressed)"
            if suppressed
            else ""
        )
        + "; a public copy and the register show their absence (docs: threat model, what a release reveals "
        "about presence)."
    )
