"""Alembic environment: runs on the connection that serialpub passes in
(``config.attributes["connection"]``), so the URL handling stays in one place."""

from alembic import context

from state.models import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
