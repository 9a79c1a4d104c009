"""Sign-offs are append-only, like the audit log: triggers refuse UPDATE and DELETE.

A sign-off is the compliance record of who let a release out; serialpub only ever inserts
one (approve, reject). An UPDATE or DELETE by anyone with write access to the database
was possible before; ``serialpub state verify`` also cross-checks the rows against the
published manifests and the audit log, which catches a change made by someone who can
drop these triggers.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for event in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER sign_offs_no_{event.lower()} BEFORE {event} ON sign_offs "
                "BEGIN SELECT RAISE(ABORT, 'sign_offs is append-only'); END"
            )
    elif dialect == "postgresql":
        op.execute(
            "CREATE FUNCTION sign_offs_append_only() RETURNS trigger AS $$ "
            "BEGIN RAISE EXCEPTION 'sign_offs is append-only'; END; $$ LANGUAGE plpgsql"
        )
        op.execute(
            "CREATE TRIGGER sign_offs_append_only BEFORE UPDATE OR DELETE ON sign_offs "
            "FOR EACH ROW EXECUTE FUNCTION sign_offs_append_only()"
        )


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for event in ("update", "delete"):
            op.execute(f"DROP TRIGGER IF EXISTS sign_offs_no_{event}")
    elif dialect == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS sign_offs_append_only ON sign_offs")
        op.execute("DROP FUNCTION IF EXISTS sign_offs_append_only()")
