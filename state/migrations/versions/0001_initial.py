"""Initial schema: datasets, releases with their status machine, groups, statistics file,
sign-offs, validation results and the append-only audit log.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "datasets",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("created", TZ, nullable=False),
    )
    op.create_table(
        "releases",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("dataset_id", sa.Integer, sa.ForeignKey("datasets.id"), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("period", sa.String(100), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("imported", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("params", sa.JSON, nullable=False),
        sa.Column("records", sa.Integer),
        sa.Column("groups", sa.Integer),
        sa.Column("suppressed", sa.Integer),
        sa.Column("max_breach", sa.Float),
        sa.Column("data_sha256", sa.String(64)),
        sa.Column("manifest_sha256", sa.String(64)),
        sa.Column("directory", sa.String(1000)),
        sa.Column("staging", sa.String(1000)),
        sa.Column("created", TZ, nullable=False),
        sa.Column("updated", TZ, nullable=False),
        sa.Column("published_at", TZ),
        sa.CheckConstraint(
            "status IN ('draft', 'validated', 'approved', 'published', 'rejected', 'failed')", name="release_status"
        ),
    )
    # one open release per dataset, and each sequence number and period published once:
    # enforced by the database, so racing processes cannot both proceed
    open_where = sa.text("status IN ('draft', 'validated', 'approved')")
    published_where = sa.text("status = 'published'")
    op.create_index(
        "one_open_release",
        "releases",
        ["dataset_id"],
        unique=True,
        sqlite_where=open_where,
        postgresql_where=open_where,
    )
    op.create_index(
        "published_seq",
        "releases",
        ["dataset_id", "seq"],
        unique=True,
        sqlite_where=published_where,
        postgresql_where=published_where,
    )
    op.create_index(
        "published_period",
        "releases",
        ["dataset_id", "period"],
        unique=True,
        sqlite_where=published_where,
        postgresql_where=published_where,
    )
    op.create_table(
        "release_groups",
        sa.Column("release_id", sa.Integer, sa.ForeignKey("releases.id"), primary_key=True),
        sa.Column("group_no", sa.Integer, primary_key=True),
        sa.Column("labels", sa.JSON, nullable=False),
        sa.Column("candidates", sa.Integer, nullable=False),
        sa.Column("records", sa.Integer, nullable=False),
        sa.Column("counts", sa.JSON, nullable=False),
    )
    op.create_table(
        "statistics",
        sa.Column("release_id", sa.Integer, sa.ForeignKey("releases.id"), primary_key=True),
        sa.Column("individuals", sa.Integer, nullable=False),
        sa.Column("classes", sa.Integer, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("members_data", sa.LargeBinary, nullable=False),
        sa.Column("classes_data", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "sign_offs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("release_id", sa.Integer, sa.ForeignKey("releases.id"), nullable=False),
        sa.Column("approver", sa.String(200), nullable=False),
        sa.Column("decision", sa.String(20), nullable=False),
        sa.Column("comment", sa.Text, nullable=False),
        sa.Column("report_sha256", sa.String(64)),
        sa.Column("decided_at", TZ, nullable=False),
    )
    op.create_table(
        "validation_results",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("release_id", sa.Integer, sa.ForeignKey("releases.id"), nullable=False),
        sa.Column("suite", sa.String(200), nullable=False),
        sa.Column("success", sa.Boolean, nullable=False),
        sa.Column("result", sa.JSON, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("created", TZ, nullable=False),
    )
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("at", TZ, nullable=False),
        sa.Column("dataset", sa.String(200), nullable=False),
        sa.Column("release_seq", sa.Integer),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("action", sa.String(50), nullable=False),
        sa.Column("detail", sa.JSON, nullable=False),
    )
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for event in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER audit_log_no_{event.lower()} BEFORE {event} ON audit_log "
                "BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END"
            )
    elif dialect == "postgresql":
        op.execute(
            "CREATE FUNCTION audit_log_append_only() RETURNS trigger AS $$ "
            "BEGIN RAISE EXCEPTION 'audit_log is append-only'; END; $$ LANGUAGE plpgsql"
        )
        op.execute(
            "CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log "
            "FOR EACH ROW EXECUTE FUNCTION audit_log_append_only()"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS audit_log_append_only ON audit_log")
        op.execute("DROP FUNCTION IF EXISTS audit_log_append_only()")
    tables = ("audit_log", "validation_results", "sign_offs", "statistics", "release_groups", "releases", "datasets")
    for table in tables:
        op.drop_table(table)
