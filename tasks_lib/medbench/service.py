"""The MedBench v4 HTTP service (FastAPI; ``medflows serve`` runs it under uvicorn).

Every route but ``GET /v1/health`` needs an API key (header ``X-API-Key``, or ``Authorization:
Bearer <key>``): none or a wrong one → 401. Routes:

* ``POST /v1/submitters`` (admin): register ``{name, admin, uploads_per_day, items_per_minute}``
  → ``{name, api_key}`` (the key is shown once, stored hashed);
* ``POST /v1/endpoints`` / ``GET /v1/endpoints``: register (list) model endpoints for API mode
  ``{model_name, model_version, model, api_base, api_key}`` (the base must be a public http(s)
  address, the key is stored encrypted and never returned: ``has_api_key``);
* ``POST /v1/splits``: a new randomized split ``{subset?, seed?}`` (``subset``:
  ``active:<subset_id>`` or the bare id) → ``{split, items}`` (public items only; charged to
  items per minute); ``GET /v1/splits/{split_id}/images/{name}``: an
  image of one of the caller's splits (a multimodal item's ``image`` is ``images/<name>``);
* ``POST /v1/submissions``: upload predictions (JSONL body; query ``model_version``,
  ``model_name``) → the version-locked submission with its score;
* ``GET /v1/submissions`` (``/{id}``): the caller's submissions with their newest scores.

Over a rate limit → 429 with ``Retry-After`` (seconds); a malformed upload → 422 with every bad
line (``errors: [{line, reason}]``) and nothing written; a re-upload of the same bytes for the
same lock → 200 with the existing version (scored now if it was not: resume), no upload charged.
Every body is capped while it is read (:class:`ServiceLimits`; 413 above), JSON bodies and upload
lines are strict JSON (no NaN/Infinity, bounded numbers, valid Unicode, bounded depth; 422
naming the rule), a 422 never echoes its input, and wrong API keys are throttled per client and
per key id before any hashing (429 with ``Retry-After``; :class:`~tasks_lib.medbench.accounts.
KeyGuard`). No route returns a reference, a key
point, a gold letter or a split's private mapping: responses are built from public items, split
info, submission views and score summaries only.
"""

from __future__ import annotations

import math
import mimetypes
from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse, Response
from pydantic import Field, SecretStr

from evaluators.core import Frozen, InputDataError, UnknownNameError
from tasks_lib.ledger import medbench as ledger
from tasks_lib.ledger.tables import EndpointRow
from tasks_lib.medbench import accounts
from tasks_lib.medbench.accounts import KeyGuard, KeyThrottled, RateLimited, Submitter
from tasks_lib.medbench.endpoints import register_endpoint
from tasks_lib.medbench.http_guard import BodyGuard, install
from tasks_lib.medbench.items import PublicItem
from tasks_lib.medbench.splits import SplitInfo, image_bytes, make_split
from tasks_lib.medbench.submissions import (
    SubmissionView,
    UploadRejected,
    store_upload,
    view,
)
from tasks_lib.rotation import subset_pool
from tasks_lib.web.routes import web_router

MAX_UPLOAD_BYTES = 32 * 1024 * 1024
"""Largest predictions body accepted (413 above)."""
MAX_JSON_BYTES = 64 * 1024
"""Largest body of every other route (413 above)."""
MAX_ID = 2 ** 63 - 1
"""Largest submission id a path may name (a ledger id is a signed 64-bit integer)."""

Scorer = Callable[[str], object]
"""Scores one stored run by id (``flows.score.score_run``: the one score flow)."""


class ServiceLimits(Frozen):
    """Request caps and failed-key throttling of one service."""

    upload_bytes: int = Field(default=MAX_UPLOAD_BYTES, gt=0,
                              description="Bytes of a predictions upload.")
    json_bytes: int = Field(default=MAX_JSON_BYTES, gt=0,
                            description="Bytes of any other request body.")
    failed_keys: int = Field(default=10, gt=0, description="Wrong API keys one client (or one "
                             "key id) may send per window before it gets 429.")
    failed_window_s: float = Field(default=60.0, gt=0,
                                   description="Window of the failed-key count (seconds).")


class NewSubmitter(Frozen):
    """Body of ``POST /v1/submitters``."""

    name: str = Field(description="Account name.")
    admin: bool = Field(default=False, description="May register submitters.")
    uploads_per_day: int = Field(default=accounts.DEFAULT_UPLOADS_PER_DAY, ge=1,
                                 description="Accepted uploads per rolling day.")
    items_per_minute: int = Field(default=accounts.DEFAULT_ITEMS_PER_MINUTE, ge=1,
                                  description="Items per rolling minute.")


class NewEndpoint(Frozen):
    """Body of ``POST /v1/endpoints`` (API mode)."""

    model_name: str = Field(min_length=1, max_length=64, description="Model name.")
    model_version: str = Field(min_length=1, max_length=128, description="Version string.")
    model: str = Field(min_length=1, max_length=200, description="litellm model string.")
    api_base: str | None = Field(
        default=None, max_length=500,
        description="OpenAI-compatible base URL, http(s) on a public address (None: a model of "
                    "the operator's providers); with it, model is openai/<name>.")
    api_key: SecretStr | None = Field(
        default=None, description="The endpoint's own API key, sent only to it (stored "
                                  "encrypted, never returned; None: no credential).")


class Endpoint(Frozen):
    """A registered endpoint as the service returns it."""

    endpoint_id: int = Field(description="Ledger id.")
    submitter: str = Field(description="Owner.")
    model_name: str = Field(description="Model name.")
    model_version: str = Field(description="Version string.")
    model: str = Field(description="litellm model string.")
    api_base: str | None = Field(description="Base URL.")
    has_api_key: bool = Field(description="An API key of its own is stored (never returned).")


class SplitRequest(Frozen):
    """Body of ``POST /v1/splits``."""

    subset: str | None = Field(default=None, max_length=107,
                               description="Rotation subset, ``active:<subset_id>`` or the bare "
                                           "id (its active version); None: the service's "
                                           "default pool.")
    seed: int | None = Field(default=None, ge=0, lt=2 ** 31,
                             description="Seed of order and permutations (None: random).")


class SplitDownload(Frozen):
    """Response of ``POST /v1/splits``."""

    split: SplitInfo = Field(description="Split identity, lock and expiry.")
    items: list[PublicItem] = Field(description="Public items, in split order.")


def _endpoint(row: EndpointRow) -> Endpoint:
    assert row.id is not None
    return Endpoint(endpoint_id=row.id, submitter=row.submitter, model_name=row.model_name,
                    model_version=row.model_version, model=row.model, api_base=row.api_base,
                    has_api_key=row.api_key_enc is not None)


def caller(request: Request, x_api_key: Annotated[str | None, Header()] = None,
           authorization: Annotated[str | None, Header()] = None) -> Submitter:
    """The authenticated submitter (401 without a valid key, 429 after too many wrong ones)."""
    key = x_api_key
    if key is None and authorization and authorization.lower().startswith("bearer "):
        key = authorization[7:].strip()
    guard: KeyGuard = request.app.state.key_guard
    who = guard.authenticate(key, request.client.host if request.client else "unknown")
    if who is None:
        raise HTTPException(401, "missing or invalid API key",
                            headers={"WWW-Authenticate": "Bearer"})
    return who


Caller = Annotated[Submitter, Depends(caller)]


def _errors(app: FastAPI) -> None:
    @app.exception_handler(RateLimited)
    def _limited(_: Request, exc: RateLimited) -> JSONResponse:
        wait = exc.refusal.retry_after_s
        if wait is None:
            return JSONResponse({"detail": str(exc)}, status_code=422)
        return JSONResponse({"detail": str(exc)}, status_code=429,
                            headers={"Retry-After": str(max(1, math.ceil(wait)))})

    @app.exception_handler(KeyThrottled)
    def _throttled(_: Request, exc: KeyThrottled) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=429,
                            headers={"Retry-After": str(max(1, math.ceil(exc.retry_after_s)))})

    @app.exception_handler(UploadRejected)
    def _rejected(_: Request, exc: UploadRejected) -> JSONResponse:
        return JSONResponse({"detail": str(exc), "n_errors": exc.n_errors,
                             "errors": [e.model_dump() for e in exc.errors]}, status_code=422)

    @app.exception_handler(InputDataError)
    def _bad_input(_: Request, exc: InputDataError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=422)

    @app.exception_handler(UnknownNameError)
    def _unknown(_: Request, exc: UnknownNameError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=422)


def create_app(score: Scorer, default_pool: str | None = None,
               limits: ServiceLimits | None = None) -> FastAPI:
    """The service.

    Args:
        score: Scores a stored run (the one score flow), called after an upload is stored.
        default_pool: Pool or ``active:<subset_id>`` a split is drawn from when the request
            names no subset (None: requests must name one).
        limits: Body caps and failed-key throttling (default: :class:`ServiceLimits`).
    """
    limits = limits or ServiceLimits()
    app = FastAPI(title="medflows MedBench v4", version="1")
    app.state.key_guard = KeyGuard(limits.failed_keys, limits.failed_window_s)
    app.add_middleware(BodyGuard, json_bytes=limits.json_bytes,
                       streamed={("POST", "/v1/submissions")},
                       stream_bytes=limits.upload_bytes)
    install(app)
    _errors(app)

    @app.get("/v1/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    app.include_router(web_router())  # the HTML pages (docs/web.md)

    @app.post("/v1/submitters", status_code=201)
    def add_submitter(body: NewSubmitter, who: Caller) -> accounts.IssuedKey:
        if not who.admin:
            raise HTTPException(403, "only an admin may register submitters")
        if ledger.get_submitter(accounts.check_name(body.name)) is not None:
            raise HTTPException(409, f"{body.name!r} is already registered")
        return accounts.register(body.name, body.admin, body.uploads_per_day,
                                 body.items_per_minute)

    @app.post("/v1/endpoints", status_code=201)
    def add_endpoint(body: NewEndpoint, who: Caller) -> Endpoint:
        key = None if body.api_key is None else body.api_key.get_secret_value()
        row = register_endpoint(who.name, body.model_name, body.model_version, body.model,
                                body.api_base, key)
        if row is None:
            raise HTTPException(409, f"{body.model_name}@{body.model_version} is already "
                                     "registered (a new version needs a new version string)")
        return _endpoint(row)

    @app.get("/v1/endpoints")
    def list_endpoints(who: Caller) -> list[Endpoint]:
        return [_endpoint(r) for r in ledger.endpoints(submitter=who.name)]

    @app.post("/v1/splits", status_code=201)
    def new_split(body: SplitRequest, who: Caller) -> SplitDownload:
        pool = subset_pool(body.subset) if body.subset else default_pool
        if pool is None:
            raise HTTPException(422, "name a subset: this service has no default pool")
        split = make_split(pool, who.name, body.seed,
                           charge=lambda n: accounts.charge_items(who, n))
        return SplitDownload(split=split.info, items=split.items)

    @app.get("/v1/splits/{split_id}/images/{name}")
    def split_image(split_id: str, name: str, who: Caller) -> Response:
        row = ledger.get_split(split_id)
        data = None if row is None or row.submitter != who.name else image_bytes(row, name)
        if data is None:
            raise HTTPException(404, f"no image {name!r} in a split of yours")
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        return Response(data, media_type=kind)

    @app.post("/v1/submissions", status_code=201)
    async def upload(request: Request, response: Response, who: Caller,
                     model_version: Annotated[str, Query(min_length=1, max_length=128)],
                     model_name: Annotated[str | None, Query(max_length=64)] = None,
                     ) -> SubmissionView:
        body = await _body(request, limits.upload_bytes)
        from starlette.concurrency import run_in_threadpool

        sub, created = await run_in_threadpool(_submit, body, who, model_version, model_name,
                                               score)
        if not created:
            response.status_code = 200
        return sub

    @app.get("/v1/submissions")
    def list_submissions(who: Caller) -> list[SubmissionView]:
        return [view(r) for r in ledger.submissions(submitter=who.name)]

    @app.get("/v1/submissions/{submission_id}")
    def one_submission(submission_id: Annotated[int, PathParam(ge=1, le=MAX_ID)],
                       who: Caller) -> SubmissionView:
        rows = ledger.submissions(id=submission_id, submitter=who.name)
        if not rows:
            raise HTTPException(404, f"no submission {submission_id} of yours")
        return view(rows[0])

    return app


async def _body(request: Request, cap: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise HTTPException(413, f"upload larger than {cap} bytes",
                                headers={"Connection": "close"})
        chunks.append(chunk)
    return b"".join(chunks)


def _submit(body: bytes, who: Submitter, model_version: str, model_name: str | None,
            score: Scorer) -> tuple[SubmissionView, bool]:
    stored = store_upload(body, "upload", who, model_version, model_name)
    sub = view(stored.row)
    if not sub.scored:
        score(stored.row.run_id)
        sub = view(stored.row)
    return sub, stored.created


