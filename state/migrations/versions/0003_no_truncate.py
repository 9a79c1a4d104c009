"""The append-only tables refuse TRUNCATE too (PostgreSQL).

The row triggers of revisions 0001 and 0002 refuse UPDATE and DELETE on ``audit_log`` and
``sign_offs``, but PostgreSQL's TRUNCATE fires no row trigger: it emptied both tables
without dropping a trigger. A statement trigger ``BEFORE TRUNCATE`` on each raises, also
when the table would be emptied by ``TRUNCATE releases CASCADE``. SQLite has no TRUNCATE:
its ``DELETE FROM`` without a condition fires the delete triggers, which refuse.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

#: the append-only tables (their triggers name the table in the error)
PROTECTED = ("audit_log", "sign_offs")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        "CREATE FUNCTION append_only_no_truncate() RETURNS trigger AS $$ "
        "BEGIN RAISE EXCEPTION '% is append-only', TG_TABLE_NAME; END; $$ LANGUAGE plpgsql"
    )
    for table in PROTECTED:
        op.execute(
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION append_only_no_truncate()"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in PROTECTED:
        op.execute(f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table}")
    op.execute("DROP FUNCTION IF EXISTS append_only_no_truncate()")
