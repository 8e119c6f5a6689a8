"""The pages as routes of the MedBench service app (``medflows serve``): mounted by
:func:`tasks_lib.medbench.service.create_app` with :func:`web_router`.

Public pages need no key: ``/`` (``/index.html``), ``/pools/<id>/v<N>.html``,
``/tasks/<id>.html``, ``/runs/<id>.html`` (not for a run that is a MedBench submission: 404),
``/style.css``. ``/medbench/submissions.html`` lists the caller's own submissions and needs the
submitter's API key: ``X-API-Key``, ``Authorization: Bearer <key>``, or HTTP Basic with the key
as password (a browser asks for it after the 401, whose ``WWW-Authenticate`` names Basic). Wrong
keys are throttled like the API's (the app's :class:`~tasks_lib.medbench.accounts.KeyGuard`).
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from tasks_lib.ledger import medbench as mb_ledger
from tasks_lib.medbench.accounts import KeyGuard, Submitter
from tasks_lib.medbench.submissions import view
from tasks_lib.web import data
from tasks_lib.web.pages import MAX_CASES, page_path, render, style

REALM = 'Basic realm="medflows MedBench submitters", charset="UTF-8"'
Version = Annotated[str | None, Query(max_length=200, description="Evaluator version shown "
                                      "(default: each run's newest score row).")]


def _key(request: Request) -> str | None:
    """The API key of a request: ``X-API-Key``, a Bearer token or a Basic password."""
    if key := request.headers.get("x-api-key"):
        return key
    scheme, _, value = (request.headers.get("authorization") or "").partition(" ")
    if scheme.lower() == "bearer":
        return value.strip()
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return decoded.partition(":")[2]
    return None


def page_caller(request: Request) -> Submitter:
    """The submitter of a page request (401 asking for Basic credentials without a valid
    key; 429 after too many wrong ones)."""
    guard: KeyGuard = request.app.state.key_guard
    who = guard.authenticate(_key(request), request.client.host if request.client else "unknown")
    if who is None:
        raise HTTPException(401, "this page needs your MedBench API key (as the password)",
                            headers={"WWW-Authenticate": REALM})
    return who


def _missing(what: str) -> HTTPException:
    return HTTPException(404, f"no {what}")


def web_router() -> APIRouter:
    """The HTML pages (left out of the OpenAPI schema: they are for people)."""
    router = APIRouter(include_in_schema=False)

    @router.get("/", response_class=HTMLResponse)
    @router.get("/index.html", response_class=HTMLResponse)
    async def index() -> str:
        view_ = await run_in_threadpool(data.index_view)
        return render("index.html", page_path("index"), title="Pools and tasks", view=view_,
                      served=True)

    @router.get("/style.css")
    def stylesheet() -> Response:
        return Response(style(), media_type="text/css")

    @router.get("/pools/{pool_id}/v{version:int}.html", response_class=HTMLResponse)
    async def pool(pool_id: str, version: int, evaluator_version: Version = None) -> str:
        board = await run_in_threadpool(data.pool_board, pool_id, version, evaluator_version)
        if board is None:
            raise _missing(f"published pool {pool_id} v{version}")
        return render("board.html", page_path("pool", pool_id, version), title=board.title,
                      view=board, served=True)

    @router.get("/tasks/{task_id}.html", response_class=HTMLResponse)
    async def task(task_id: str, evaluator_version: Version = None) -> str:
        board = await run_in_threadpool(data.task_board, task_id, evaluator_version)
        if board is None:
            raise _missing(f"run of task {task_id}")
        return render("board.html", page_path("task", task_id), title=board.title,
                      view=board, served=True)

    @router.get("/runs/{run_id}.html", response_class=HTMLResponse)
    async def run(run_id: str) -> str:
        run_view = await run_in_threadpool(data.public_run, run_id)
        if run_view is None:
            raise _missing(f"public run {run_id}")
        return render("run.html", page_path("run", run_id), title=f"Run {run_id}",
                      view=run_view, served=True, max_cases=MAX_CASES,
                      pool_public=data.pool_is_published(run_view.run))

    @router.get("/medbench/submissions.html", response_class=HTMLResponse)
    async def submissions(who: Annotated[Submitter, Depends(page_caller)]) -> str:
        rows = await run_in_threadpool(mb_ledger.submissions, submitter=who.name)
        subs = await run_in_threadpool(lambda: [view(r) for r in rows])
        return render("submissions.html", page_path("submissions"),
                      title="My MedBench submissions", who=who.name, subs=subs, served=True)

    return router
