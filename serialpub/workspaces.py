"""The workspaces Airflow serves: ``SERIALPUB_WORKSPACES`` read into dataset -> folder.

Kept apart from :mod:`serialpub.workflow.orchestration` so that the DAG file can list its DAGs
when it is parsed without importing the pipeline (pandas, pyarrow, Great Expectations,
SQLAlchemy): the DAG processor parses the file every few seconds (docs/airflow.md).
"""

from __future__ import annotations

import os
from pathlib import Path

from serialpub.config import load_config
from serialpub.errors import InputError

WORKSPACES_ENV = "SERIALPUB_WORKSPACES"
#: where Airflow's api-server serves the release pages (:mod:`serialpub.airflow_plugin`)
URL_PREFIX = "/serialpub"


def report_url(base_url: str, dataset: str, seq: int, page: str = "report.html") -> str:
    """The address under ``base_url`` (Airflow's ``[api] base_url``) of release ``seq``'s
    ``page`` (``report.html`` or ``validation.html``), served by :mod:`serialpub.airflow_plugin`."""
    return f"{base_url.rstrip('/')}{URL_PREFIX}/{dataset}/releases/{seq}/{page}"


def workspaces(value: str | None = None, skipped: list[str] | None = None) -> dict[str, Path]:
    """Dataset name -> workspace folder, from ``SERIALPUB_WORKSPACES`` (or ``value``).

    Args:
        skipped: if given, a workspace that cannot be served (an unreadable or invalid
            serialpub.yaml, a dataset named twice) is left out and one line saying why is
            appended here, so that one bad workspace does not take the others down (the DAG
            processor, docs/airflow.md); None: it is raised.

    Raises:
        InputError: a folder without a readable serialpub.yaml, or a dataset named twice
            (only when ``skipped`` is None).
    """
    text = os.environ.get(WORKSPACES_ENV, "") if value is None else value
    found: dict[str, Path] = {}
    for part in filter(None, (p.strip() for p in text.split(os.pathsep))):
        try:
            ws = load_config(Path(part))
            name = ws.config.dataset
            if name in found:
                raise InputError(
                    f"{WORKSPACES_ENV}: dataset {name!r} is configured twice ({found[name]} and {ws.root})"
                )
        except InputError as exc:
            if skipped is None:
                raise
            skipped.append(f"workspace {part} skipped: {exc}")
            continue
        found[name] = ws.root
    return found
