"""API mode with registered endpoints: a submitter's model endpoint (``POST /v1/endpoints``)
becomes an agent the API-mode execute calls, and each evaluation of it is a version-locked,
append-only submission like an upload.

:func:`lock_api_submission` admits one evaluation before any call is made (uploads-per-day
limit; the submitter's items-per-minute limit becomes the endpoint's requests-per-minute cap)
and fixes its run id: version ``n`` of a lock is replicate ``n − 1`` of the endpoint's agent, so
every version is a fresh run with its own item order and its own call-cache salt. The caller then
runs the endpoint's agent as that replicate on the one execute path
(:func:`tasks_lib.execution.steps.execute_items`), records the run and scores it with the one
score flow.

A registered endpoint gets its own credential or none, never the operator's
(:func:`endpoint_completion`): the submitter's API key is kept encrypted
(:mod:`tasks_lib.medbench.credentials`) and sent only to that endpoint; an endpoint with an
``api_base`` is called as an OpenAI-compatible server (model ``openai/<name>``) with its key or
``"not-needed"``, and its base is checked by :func:`tasks_lib.netpolicy.check_api_base` when it
is registered and before every call. An endpoint with no ``api_base`` names a model the
operator's own providers serve (with the operator's keys, at the operator's cost) unless it has
its own key.
"""

from __future__ import annotations

import time

from evaluators.core import InputDataError, Track
from tasks_lib.agents import AgentSpec, Harness
from tasks_lib.ledger import medbench as ledger
from tasks_lib.ledger.tables import EndpointRow, SubmissionRow
from tasks_lib.llm import CallOptions, LiteLLMCompletion
from tasks_lib.medbench import accounts
from tasks_lib.medbench.accounts import RateLimited
from tasks_lib.medbench.credentials import decrypt, encrypt
from tasks_lib.medbench.items import read_manifest
from tasks_lib.netpolicy import RefusedEndpoint, check_api_base
from tasks_lib.qa.runner import run_id_for
from tasks_lib.rotation import resolve_pool
from tasks_lib.tracks.base import kit_for


def endpoint(endpoint_id: int) -> EndpointRow:
    """A registered endpoint (an unknown id is the user's mistake)."""
    rows = ledger.endpoints(id=endpoint_id)
    if not rows:
        raise InputDataError("endpoint", f"no registered endpoint {endpoint_id}")
    return rows[0]


OPENAI_COMPATIBLE = "openai/"
"""Model prefix of an endpoint with an ``api_base``: litellm's OpenAI client, which sends only
the key it is given (other providers' clients sign with the operator's cloud credentials)."""
NO_KEY = "not-needed"
"""What an endpoint with an ``api_base`` and no key of its own is sent as its key."""


def check_model(model: str, api_base: str | None) -> str:
    """``model`` when an endpoint with ``api_base`` may be called as it."""
    if api_base is not None and not (model.startswith(OPENAI_COMPATIBLE)
                                     and len(model) > len(OPENAI_COMPATIBLE)):
        raise InputDataError("model", f"an endpoint with an api_base is called as an "
                                      f"OpenAI-compatible server: use {OPENAI_COMPATIBLE}<name> "
                                      f"(got {model!r})")
    return model


def check_provider(model: str) -> str:
    """``model`` when litellm knows its provider and the provider's default base (if litellm
    has one, e.g. ``ollama/…`` → ``http://localhost:11434``) passes the address policy."""
    import litellm

    litellm.suppress_debug_info = True  # else it prints a provider list on stdout
    try:
        default_base = litellm.get_llm_provider(model)[3]
    except litellm.exceptions.BadRequestError:
        raise InputDataError("model", f"litellm knows no provider for {model!r} (name one, "
                                      "e.g. anthropic/<model>)") from None
    if default_base:
        try:
            check_api_base(str(default_base))
        except RefusedEndpoint as exc:
            raise InputDataError("model", f"{model!r} is served at {default_base}: "
                                          f"{exc.reason}") from None
    return model


def register_endpoint(submitter: str, model_name: str, model_version: str, model: str,
                      api_base: str | None = None, api_key: str | None = None
                      ) -> EndpointRow | None:
    """Check and register a submitter's endpoint (its key stored encrypted).

    Returns:
        The new row; None when ``(submitter, model_name, model_version)`` is already registered.

    Raises:
        InputDataError: A refused ``api_base`` or ``model``, a malformed key, or a key when the
            operator set no credential key (fields named; nothing written).
    """
    if api_base is not None:
        check_api_base(api_base)
    else:
        check_provider(model)
    check_model(model, api_base)
    sealed = None if api_key is None else encrypt(api_key)
    return ledger.add_endpoint(EndpointRow(
        submitter=submitter, model_name=model_name, model_version=model_version, model=model,
        api_base=api_base, api_key_enc=sealed))


def endpoint_completion(agent: AgentSpec, options: CallOptions) -> LiteLLMCompletion:
    """The call door of an API-mode agent: a registered endpoint's (``endpoint_id`` param) is
    built from its ledger row (its base, its own key or ``"not-needed"``, the base re-checked
    before every request); any other agent's is the operator's (:meth:`LiteLLMCompletion.for_run`).
    """
    if "endpoint_id" not in agent.params:
        return LiteLLMCompletion.for_run(agent.params, options)
    row = endpoint(int(str(agent.params["endpoint_id"])))
    api_key = None if row.api_key_enc is None else decrypt(row.api_key_enc)
    if row.api_base is None:
        return LiteLLMCompletion.for_run(agent.params, options, api_key=api_key)
    check_model(row.model, row.api_base)
    params = {**agent.params, "api_base": row.api_base}
    return LiteLLMCompletion.for_run(params, options, api_key=api_key or NO_KEY,
                                     guard=check_api_base)


def endpoint_agent(row: EndpointRow) -> AgentSpec:
    """The API-mode agent of a registered endpoint (same harness and method as ad hoc models)."""
    who = ledger.get_submitter(row.submitter)
    assert who is not None and row.id is not None
    params: dict[str, str | int | float | bool] = {
        "submitter": row.submitter, "model_version": row.model_version,
        "endpoint_id": row.id, "rpm": who.items_per_minute}
    if row.api_base:
        params["api_base"] = row.api_base
    return AgentSpec(agent_id=f"{row.submitter}/{row.model_name}@{row.model_version}",
                     harness=Harness.QA_METHOD, model=row.model, method="medbench_api",
                     params=params)


def lock_api_submission(endpoint_id: int, pool: str, now: float | None = None
                        ) -> SubmissionRow:
    """Admit one API-mode evaluation of a registered endpoint on ``pool`` (a root URL or
    ``active:<subset_id>``) and append its version-locked submission row.

    Returns:
        The submission; its ``version − 1`` is the replicate to run and its ``run_id`` the id
        that run will have.

    Raises:
        RateLimited: Over the submitter's uploads-per-day limit (the refusal is logged).
    """
    row = endpoint(endpoint_id)
    agent = endpoint_agent(row)
    url = resolve_pool(pool)
    manifest = read_manifest(url)
    who = ledger.get_submitter(row.submitter)
    assert who is not None
    uploads, _ = accounts.limits(accounts.public(who))
    submission = SubmissionRow(
        submitter=row.submitter, model_name=row.model_name, model_version=row.model_version,
        pool_id=manifest.pool_id, pool_version=manifest.version,
        pool_hash=manifest.content_hash,
        evaluator_version=kit_for(Track.MEDBENCH).evaluator_version, version=0, mode="api",
        split_id=None, run_id="", n_predictions=manifest.n_items)
    outcome = ledger.admit(
        row.submitter, [ledger.Charge(uploads, 1)], time.time() if now is None else now,
        submission, run_id_of=lambda v: run_id_for(agent, manifest.content_hash, v - 1))
    if outcome.refusal is not None:
        raise RateLimited(outcome.refusal)
    assert outcome.submission is not None
    return outcome.submission
