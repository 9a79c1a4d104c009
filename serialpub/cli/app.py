"""The ``serialpub`` command line's application object and what its commands share.

Bad input raises :class:`serialpub.errors.InputError`; :func:`main` prints it as one
line on standard error and exits with code 2, without a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from serialpub.errors import InputError, ValidationFailed

if TYPE_CHECKING:
    import pandas as pd

app = typer.Typer(
    help="Serial publishing of anonymized microdata under the global guarantee.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
# a pipe or CI log gets a width that fits the release table; a terminal keeps its own
console = Console(width=None if sys.stdout.isatty() else 120)

#: owner of a release that waits for a sign-off from the command line (recovery leaves it)
AWAITING_SIGN_OFF = "awaiting sign-off (serialpub approve / reject)"


def split_list(text: str) -> list[str]:
    """The non-empty, stripped items of a comma-separated option."""
    return [c.strip() for c in text.split(",") if c.strip()]


def ratio_option(text: str, option: str = "--propensity-ratio") -> int | dict[str, int]:
    """``--propensity-ratio``: a whole number (every protected value), or ``value=ρ`` items
    joined by commas (each listed value its own ρ, the others 1).

    Raises:
        InputError: anything else (the line names the option and the two forms)."""
    items = split_list(text)
    try:
        if len(items) == 1 and "=" not in items[0]:
            return int(items[0])
        pairs = [item.rsplit("=", 1) for item in items]
        if not pairs or any(len(p) != 2 or not p[0].strip() for p in pairs):
            raise ValueError
        return {v.strip(): int(r) for v, r in pairs}
    except ValueError:
        raise InputError(
            f"{option} {text[:40]!r}: give a whole number (3) or value=ratio items joined by commas "
            "(Tech-support=3,Armed-Forces=2)"
        ) from None


def read_csv_table(path: Path) -> pd.DataFrame:
    """A CSV file as text columns.

    Raises:
        InputError: missing, empty or unreadable, naming the file and the fix.
    """
    import pandas as pd

    try:
        return pd.read_csv(path, dtype=str, na_filter=False)
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: the file is empty; it needs a header row and data rows") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a readable CSV file ({exc}); save it as UTF-8 CSV") from None


def outcome_table(outcomes: list[Any], ell: float) -> Table:
    """The table of published releases the demo and ``serialpub release`` print."""
    table = Table(
        title="Published releases",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,  # one space less between columns: the table fits 120 characters
        caption=(
            f"group size in candidates (cand) and records (rec); max p: largest breach probability "
            f"over all releases so far (bound 1/ℓ = {1 / ell:.3f}); absent: register individuals in no published "
            "region, whom the release shows were not in its snapshot (docs/threat-model.md); q.err: average "
            "relative error of 5,000 random range-count queries, each group's counts spread over the register "
            "individuals of its region (register-joint, what a data user computes); base: the same for a release "
            "of the sensitive histogram alone; gain: base - q.err, what the release tells beyond the histogram; "
            "q.err 001: spread uniformly over the leaves (paper 001); s: seconds"
        ),
        caption_justify="left",
    )
    for col in (
        "rel",
        "records",
        "groups",
        "supp",
        "cand avg",
        "cand max",
        "rec avg",
        "rec max",
        "max p",
        "absent",
        "q.err",
        "base",
        "gain",
        "q.err 001",
        "s",
    ):
        table.add_column(col, justify="right")
    for o in outcomes:
        table.add_row(
            str(o.seq),
            str(o.records),
            str(o.groups),
            str(o.suppressed),
            f"{o.avg_candidates:.0f}",
            str(o.max_candidates),
            f"{o.avg_records:.1f}",
            str(o.max_records),
            f"{o.max_breach:.4f}",
            "-" if o.shown_absent is None else str(o.shown_absent),
            f"{o.query_error_joint:.2f}",
            f"{o.query_error_baseline:.2f}",
            f"{o.query_error_baseline - o.query_error_joint:+.2f}",
            f"{o.query_error:.2f}",
            f"{o.seconds:.1f}",
        )
    return table


#: exit codes (docs/commands.md): bad input or a refused request, a failed release
#: validation, and the environment failing under a run (disk, file permissions, database).
#: ``serialpub audit``'s verdicts exit 0, 1, 5 and 6, distinct from these
#: (:data:`serialpub.analysis.audit.result.EXIT_STATUS`)
EXIT_INPUT, EXIT_VALIDATION, EXIT_ENVIRONMENT = 2, 3, 4
#: ``serialpub --debug ...`` or this variable set to 1: errors keep their Python traceback
DEBUG_ENV = "SERIALPUB_DEBUG"
_debug = {"on": False}


@app.callback()
def _options(
    debug: bool = typer.Option(False, "--debug", help="On an error, print the Python traceback as well."),
) -> None:
    _debug["on"] = _debug["on"] or debug  # the flag or SERIALPUB_DEBUG=1 (read by main first)


def main() -> None:
    """Entry point of the ``serialpub`` command.

    Every error is one line on standard error with the exit code of docs/commands.md; the
    traceback only with ``--debug`` (or ``SERIALPUB_DEBUG=1``).
    """
    import os

    _debug["on"] = os.environ.get(DEBUG_ENV, "") == "1"
    try:
        app()  # standalone mode: typer handles usage errors (exit 2) and --help itself
    except Exception as exc:
        if _debug["on"]:
            raise
        code, text = error_line(exc)
        print(text, file=sys.stderr)
        sys.exit(code)


#: the modules of the publisher's packages, which ``pip install 'serialpub[publisher]'``
#: (``[project.optional-dependencies]`` of pyproject.toml) installs: the reader's commands
#: (``query``, ``expand``, ``audit``) import none of them (docs/data-users.md, "Install the reader")
PUBLISHER_MODULES = frozenset(
    {"yaml", "sqlalchemy", "alembic", "psycopg", "great_expectations", "jinja2", "matplotlib"}
)


def missing_publisher_module(exc: BaseException) -> str | None:
    """The publisher's module whose absence ``exc`` reports (a reader install running a
    publisher command), or None."""
    name = exc.name if isinstance(exc, ModuleNotFoundError) else None
    top = (name or "").partition(".")[0]
    return top if top in PUBLISHER_MODULES else None


def error_line(exc: Exception) -> tuple[int, str]:
    """The exit code and the message (one line, plus one per failed expectation) of an error."""
    if (missing := missing_publisher_module(exc)) is not None:
        return EXIT_INPUT, (
            f"serialpub: error: this command is the publisher's and needs its packages ({missing} is not "
            "installed): pip install 'serialpub[publisher]'"
        )
    # the state's and the database's error classes only from a process that loaded them: a
    # reader install has neither package, and an exception of a class never imported cannot occur
    engine, database = sys.modules.get("state.engine"), sys.modules.get("sqlalchemy.exc")
    state_errors = () if engine is None else (engine.StateError,)
    scrubbed = (lambda text: text) if engine is None else engine.scrubbed  # no URL was opened without it

    if engine is not None and isinstance(exc, engine.StateUnavailable):  # where the database is kept
        return EXIT_ENVIRONMENT, f"serialpub: error: {exc}"
    if isinstance(exc, (InputError, *state_errors)):
        failures = [f"  - {line}" for line in getattr(exc, "failures", [])]  # one per failed expectation
        return EXIT_INPUT, "\n".join([f"serialpub: error: {exc}", *failures])
    if isinstance(exc, ValidationFailed):
        return EXIT_VALIDATION, "\n".join([f"serialpub: validation failed: {exc}", *(f"  - {x}" for x in exc.failures)])
    # the run stopped part-way; publication is crash-safe (docs/operating.md), so what it
    # left is finished or rolled back by the next command's recovery
    after = "nothing half-done is published; fix the cause and rerun (the next command recovers)"
    if database is not None and isinstance(exc, database.DBAPIError):
        what = "connection was lost" if exc.connection_invalidated else "refused the operation"
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig is not None else type(exc).__name__
        if "readonly" in reason:  # rerunning alone cannot help: the database must become writable
            after = (
                "its file, folder or file system is read-only: make it writable, or point database_url "
                "(SERIALPUB_DATABASE_URL) at a writable one, then rerun; nothing half-done is published"
            )
        return EXIT_ENVIRONMENT, f"serialpub: error: the state database {what}: {scrubbed(reason)}; {after}"
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return EXIT_ENVIRONMENT, f"serialpub: error: {where}{exc.strerror or exc}; {after}"
    return 1, (
        f"serialpub: internal error: {type(exc).__name__}: {scrubbed(str(exc))}; "
        "rerun with --debug for the traceback and report it"
    )
