"""Airflow plugin: a release's report behind a link that an approver opens in a browser.

The sign-off prompt in Airflow ("Required Actions") links to
``<[api] base_url>/serialpub/<dataset>/releases/<N>/report.html`` (docs/airflow.md). This
plugin serves that route from the api-server. It is registered through the package's
``airflow.plugins`` entry point, so an Airflow that has serialpub installed serves it with
no configuration. It serves:

- while release N awaits sign-off, the page in its staging folder, which is the page whose
  sha256 the decision records;
- once N is published, the same page from ``release-NNNN/``, so the link in an answered
  prompt still opens what was signed;
- ``validation.html`` (every expectation) beside it, under the same rules.

Who may open it: the user that Airflow's own login established (the ``_token`` cookie of
the UI, or a ``Bearer`` token), and only if Airflow's auth manager lets that user read the
dataset's DAG ``serialpub_release_<dataset>``. So the pages are as confidential as the DAG's
runs and prompts. A browser without a login is sent to Airflow's login page and comes back
after it. A rejected, failed or unknown release gives 404 with one line saying why.

The workspaces are those of ``SERIALPUB_WORKSPACES`` (:mod:`serialpub.workspaces`), which the
api-server's environment must hold like the scheduler's. Importing this module is cheap:
Airflow loads plugins in every one of its processes, so the pipeline (pandas, GX, ...) is
imported by a request, never at load.
"""

from __future__ import annotations

from typing import Any, Literal

from airflow.plugins_manager import AirflowPlugin
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, PlainTextResponse, RedirectResponse, Response

from serialpub.workspaces import URL_PREFIX

app = FastAPI(title="serialpub release reports", docs_url=None, redoc_url=None, openapi_url=None)


async def _user(request: Request) -> Any:
    """The Airflow user of the request (Bearer header first, then the UI's cookie), or None."""
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.security import HTTPAuthorizationCredentials

    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    bearer = HTTPAuthorizationCredentials(scheme=scheme, credentials=credentials) if credentials else None
    try:
        return await get_user(request, None, bearer)
    except HTTPException as exc:
        if exc.status_code in (401, 403):
            return None
        raise


@app.get("/{dataset}/releases/{seq}/{page}", response_model=None)
async def release_page(
    dataset: str, seq: int, page: Literal["report.html", "validation.html"], request: Request
) -> Response:
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails

    manager = get_auth_manager()
    user = await _user(request)
    if user is None:
        return RedirectResponse(manager.get_url_login(next_url=str(request.url)), status_code=303)
    if not manager.is_authorized_dag(method="GET", user=user, details=DagDetails(id=f"serialpub_release_{dataset}")):
        return PlainTextResponse(f"{user.get_name()!r} may not read the DAG serialpub_release_{dataset}", 403)
    return _page(dataset, seq, page)


def _page(dataset: str, seq: int, page: str) -> Response:
    """The file, or 404 with the reason (no such dataset in SERIALPUB_WORKSPACES, no report)."""
    from serialpub.config import load_config
    from serialpub.errors import InputError
    from serialpub.workflow.publisher import Publisher
    from serialpub.workspaces import WORKSPACES_ENV, workspaces

    try:
        skipped: list[str] = []  # one bad workspace does not hide the others' pages
        roots = workspaces(skipped=skipped)
        if dataset not in roots:
            why = "".join(f"; {line}" for line in skipped)
            return PlainTextResponse(f"no dataset {dataset!r} in this api-server's {WORKSPACES_ENV}{why}", 404)
        report = Publisher(load_config(roots[dataset])).report_page(seq)
    except InputError as exc:
        return PlainTextResponse(str(exc), 404)
    path = report.with_name(page)
    if not path.is_file():
        return PlainTextResponse(f"release {seq} of {dataset!r} has no {page}", 404)
    # the page is the signed file, byte for byte: no caching, so a decision taken since shows
    return FileResponse(path, media_type="text/html", headers={"Cache-Control": "no-store"})


class SerialpubPlugin(AirflowPlugin):
    """Registers :data:`app` under :data:`URL_PREFIX` in Airflow's api-server."""

    name = "serialpub"
    # the base class declares it a plain list attribute; Airflow reads it from the class
    fastapi_apps = [{"app": app, "url_prefix": URL_PREFIX, "name": "serialpub release reports"}]  # noqa: RUF012
