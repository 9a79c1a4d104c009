"""Opening the state database: engines, the schema version check and migrations.

A database with no tables is brought to the current schema on first use, so a newcomer
needs no setup step. A database at another schema revision is refused with the command
that fixes it (``serialpub db upgrade``); serialpub never migrates a populated database
behind the operator's back.

SQLite (the embedded default) runs every transaction as ``BEGIN IMMEDIATE``: a writer
takes the database lock when its transaction starts, so two processes cannot read the
same state and both write after it; the other waits up to ``SQLITE_BUSY_SECONDS``.
PostgreSQL uses row locks and the partial unique indexes of the schema.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, OperationalError

SQLITE_BUSY_SECONDS = 60
MIGRATIONS = Path(__file__).resolve().parent / "migrations"
#: PostgreSQL advisory lock taken while migrating (SQLite: BEGIN IMMEDIATE serializes)
UPGRADE_LOCK = 0x5E12A1_0001


class StateError(Exception):
    """The state database cannot be used as it is; the message says why and what to do."""


class StateUnavailable(StateError):
    """The state database cannot be opened because of where it is kept: its disk is full
    or failing, or its file or folder is not writable. Raised before any transaction, so
    nothing was changed; the message names the path and the fix. The command line exits
    with the environment's code (docs/commands.md), not the bad-input one."""


#: free bytes under which a SQLite "disk I/O error" is reported as a full disk (SQLite says
#: "disk I/O error" when it cannot create its -wal or -shm file on a full disk)
LOW_SPACE_BYTES = 1 << 20


def _sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL (``sqlite:///path`` or ``sqlite:///file:path?...&uri=true``),
    None for an in-memory database or another dialect."""
    parsed = make_url(url)
    database = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or database in ("", ":memory:"):
        return None
    return Path(database.removeprefix("file:").split("?", 1)[0]).absolute()


def _unavailable(url: str, reason: str) -> StateUnavailable | None:
    """A SQLite database refused at opening for a reason of its file system, as one line
    naming the path and the fix; None for any other reason."""
    path = _sqlite_file(url)
    if path is None:
        return None
    folder = path.parent
    unchanged = "nothing was changed"
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        free = None
    if "disk is full" in reason or ("disk I/O error" in reason and free is not None and free < LOW_SPACE_BYTES):
        return StateUnavailable(
            f"the state database {path} cannot be opened: its disk is full ({free} bytes free; SQLite: {reason}); "
            f"free space there and rerun; {unchanged}"
        )
    if "disk I/O error" in reason:
        return StateUnavailable(
            f"the state database {path} cannot be opened: disk I/O error; check its disk (space, health) and that "
            f"its folder is writable, then rerun; {unchanged}"
        )
    # one path in the line: with the fix, a long one still fits 300 characters
    elsewhere = "or set database_url / SERIALPUB_DATABASE_URL elsewhere"
    if "unable to open database file" in reason or "readonly" in reason:
        if not folder.is_dir():
            return StateUnavailable(
                f"the state database {path} cannot be created: its folder does not exist; create it {elsewhere}; "
                f"{unchanged}"
            )
        if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
            return StateUnavailable(
                f"the state database {path} cannot be opened for writing: its folder is read-only; "
                f"make it writable {elsewhere}; {unchanged}"
            )
    return None


#: query parameters of a database URL that carry a secret (libpq's password, sslpassword,
#: and the token-style names some drivers take): masked like the URL's own password
SECRET_QUERY_KEYS = ("password", "passwd", "pwd", "secret", "token")


def _secrets(url: str) -> list[str]:
    try:
        parsed = make_url(url)
    except ArgumentError:
        return []
    found = [parsed.password] if parsed.password else []
    for key, value in parsed.query.items():
        if any(word in key.lower() for word in SECRET_QUERY_KEYS):
            found.extend([value] if isinstance(value, str) else value)
    return [str(s) for s in found if s]


#: secrets of every database URL this process opened (see :func:`scrubbed`)
_OPENED_SECRETS: set[str] = set()


def scrubbed(text: str) -> str:
    """``text`` (e.g. a driver's error caught far from the URL) with the secrets of every
    database URL this process opened replaced by ***."""
    for secret in sorted(_OPENED_SECRETS, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def masked(url: str, text: str | None = None) -> str:
    """The URL (or ``text``, e.g. a driver's error about it) with every secret of the URL
    replaced by ***: the password in ``user:password@`` and in any query parameter named like
    one (``?password=``, ``?sslpassword=``, :data:`SECRET_QUERY_KEYS`)."""
    if text is None:
        try:
            text = make_url(url).render_as_string(hide_password=True)
        except ArgumentError:
            return "<unparseable database URL>"
    # longest first, so a secret that contains another is masked whole
    for secret in sorted(_secrets(url), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def _alembic_config(connection: Any) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    head = ScriptDirectory.from_config(_alembic_config(None)).get_current_head()
    assert head is not None
    return head


def create(url: str) -> Engine:
    """An engine for ``url`` without touching the schema.

    Raises:
        StateError: the URL is malformed or names a driver that is not installed.
    """
    _OPENED_SECRETS.update(_secrets(url))
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise StateError(f"cannot parse the database URL {masked(url)!r}; e.g. sqlite:///state.sqlite") from None
    try:
        if parsed.get_backend_name() == "sqlite":
            engine = create_engine(parsed, connect_args={"timeout": SQLITE_BUSY_SECONDS})

            @event.listens_for(engine, "connect")
            def _connect(dbapi_conn: Any, _rec: Any) -> None:
                dbapi_conn.isolation_level = None  # let the "begin" hook below emit BEGIN
                cur = dbapi_conn.cursor()
                cur.execute("PRAGMA foreign_keys=ON")
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA synchronous=FULL")
                cur.close()

            @event.listens_for(engine, "begin")
            def _begin(conn: Any) -> None:
                conn.exec_driver_sql("BEGIN IMMEDIATE")

            return engine
        return create_engine(parsed, pool_pre_ping=True)
    except ImportError as exc:
        raise StateError(f"no driver for {masked(url)}: {masked(url, str(exc))}") from None


def current_revision(engine: Engine) -> tuple[str | None, bool]:
    """(Alembic revision or None, whether the database has any table).

    A SQLite file another process is creating can refuse a connection with "database is
    locked" before any transaction (switching a new file to WAL takes an exclusive lock
    outside the busy handler), so such errors are retried up to SQLITE_BUSY_SECONDS.

    Raises:
        StateError: the database is unreachable.
    """
    deadline = time.monotonic() + SQLITE_BUSY_SECONDS
    pause = 0.05
    while True:
        try:
            with engine.connect() as conn:
                has_tables = bool(inspect(conn).get_table_names())
                return MigrationContext.configure(conn).get_current_revision(), has_tables
        except OperationalError as exc:
            reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
            if engine.dialect.name == "sqlite" and "locked" in reason and time.monotonic() < deadline:
                time.sleep(pause)
                pause = min(pause * 2, 1.0)
                continue
            url = engine.url.render_as_string(hide_password=False)
            raise _unavailable(url, reason) or StateError(
                f"cannot reach the state database {masked(url)}: {masked(url, reason)}"
            ) from None


def upgrade(engine: Engine) -> tuple[str | None, str]:
    """Migrate the database to the newest schema. Returns (revision before, after)."""
    before, _ = current_revision(engine)
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            # two processes creating a new database's schema at once: the second waits here,
            # then finds the schema at head and does nothing
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": UPGRADE_LOCK})
        command.upgrade(_alembic_config(conn), "head")
    return before, head_revision()


def open_engine(url: str) -> Engine:
    """An engine whose database is at the current schema (a new, empty one is created).

    Raises:
        StateError: unreachable, or at another schema revision (run ``serialpub db upgrade``).
    """
    engine = create(url)
    revision, has_tables = current_revision(engine)
    head = head_revision()
    if revision == head:
        return engine
    if revision is None and not has_tables:
        upgrade(engine)
        return engine
    found = f"schema revision {revision}" if revision else "tables without a schema revision"
    raise StateError(
        f"the state database {masked(url)} has {found}; this serialpub needs revision {head}. "
        "Back it up, then run 'serialpub db upgrade'"
    )
