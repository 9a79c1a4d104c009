"""Alembic migrations of the state database (run by ``serialpub db upgrade``)."""
