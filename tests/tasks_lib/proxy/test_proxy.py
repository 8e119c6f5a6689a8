"""The metered model proxy against the fake provider: replies, meter, cache, budget, allow-list,
refusals and the provider key."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest
from support.openai_server import FakeOpenAIServer

from tasks_lib.agents import AgentSpec, Harness
from tasks_lib.domain import RunStatus, Track
from tasks_lib.errors import InputDataError
from tasks_lib.pricing import price_snapshot
from tasks_lib.proxy import METER_FILE, ProxyConfig, ProxyMeter, serve_proxy
from tasks_lib.records import RunRecord, run_store

from .conftest import PROVIDER_KEY, client, config_for

ASK = [{"role": "user", "content": "alpha beta gamma delta"}]


def test_a_plain_openai_client_gets_the_providers_reply_and_the_meter_counts_it(
        provider: FakeOpenAIServer) -> None:
    with serve_proxy("proxy-reply", config_for(provider)) as handle:
        agent = client(handle)
        assert [m.id for m in agent.models.list()] == ["gpt-4o-mini", "small"]
        reply = agent.chat.completions.create(model="small", messages=ASK, max_tokens=50,
                                              temperature=0.2)
        live = handle.meter()
    assert reply.choices[0].message.content == "delta gamma beta alpha"
    assert reply.model == "small" and reply.choices[0].finish_reason == "stop"
    # the provider got the mapped model and the agent's parameters
    sent = provider.requests[-1]
    assert sent["model"] == "gpt-4o-mini" and sent["max_tokens"] == 50
    assert sent["temperature"] == 0.2 and sent["messages"] == ASK
    # fake provider usage: prompt = 4 words, completion = 4 words
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (4, 4)
    usage = live.models["small"]
    assert (usage.calls, usage.prompt_tokens, usage.completion_tokens) == (1, 4, 4)
    assert usage.cost_usd == pytest.approx(price_snapshot().cost("gpt-4o-mini", 4, 4))
    assert usage.cost_usd == pytest.approx((4 * 0.15 + 4 * 0.60) / 1e6)
    assert live.total == usage and "gpt-4o-mini" not in live.models
    # stored beside the run when the proxy stops, and it fills the run record
    stored = ProxyMeter.model_validate(run_store("proxy-reply").read_json(METER_FILE))
    assert stored == live
    record = RunRecord(run_id="proxy-reply",
                       agent=AgentSpec(agent_id="outside", harness=Harness.TOOL_LOOP,
                                       model="small"),
                       task_id="t", track=Track.CHALLENGE, status=RunStatus.COMPLETED,
                       pool_url="p", pool_id="p", pool_version=1, pool_hash="h")
    metered = stored.onto(record)
    assert (metered.turns, metered.input_tokens, metered.output_tokens) == (1, 4, 4)
    assert metered.cost_usd == metered.new_cost_usd == usage.cost_usd
    assert metered.cache_hits == 0


def test_a_request_may_name_the_provider_model_behind_an_alias(
        provider: FakeOpenAIServer) -> None:
    """Scaffolds that route on the model name (AIDE sends a name it does not know as OpenAI's
    to the chat API of OPENAI_BASE_URL) can ask for the provider model itself."""
    with serve_proxy("proxy-provider-name", config_for(provider)) as handle:
        reply = client(handle).chat.completions.create(model="openai/gpt-4o-mini", messages=ASK)
        meter = handle.meter()
    assert reply.model == "gpt-4o-mini"  # the first alias of that provider model
    assert provider.requests[-1]["model"] == "gpt-4o-mini"
    assert list(meter.models) == ["gpt-4o-mini"] and meter.refused_model == 0


def test_a_replayed_run_is_served_from_the_call_cache(provider: FakeOpenAIServer,
                                                      cache_on: Path) -> None:
    config = config_for(provider, salt="replicate-0")
    with serve_proxy("proxy-cache", config) as handle:
        agent = client(handle)
        first = [agent.chat.completions.create(model="gpt-4o-mini", messages=ASK)
                 for _ in range(2)]
        live = handle.meter()
    # within a run an identical request is the next sample (its own cache entry), as for
    # medflows' own agents; both went to the provider
    assert len(provider.requests) == 2 and live.total.cache_hits == 0
    keys = run_store("proxy-cache").read_text("calls/proxy.txt").split()
    assert len(keys) == 2 and all((cache_on / "llm-cache" / k[:2] / f"{k}.json").is_file()
                                  for k in keys)
    with serve_proxy("proxy-cache", config) as handle:  # the same run again
        again = [client(handle).chat.completions.create(model="gpt-4o-mini", messages=ASK)
                 for _ in range(2)]
        replay = handle.meter()
    assert len(provider.requests) == 2  # nothing new was sent
    assert [r.choices[0].message.content for r in again] == [
        r.choices[0].message.content for r in first]
    assert replay.total.cache_hits == replay.total.calls == 2
    assert replay.total.new_cost_usd == 0.0
    assert replay.total.cost_usd == pytest.approx(live.total.cost_usd)  # original price
    with serve_proxy("proxy-cache-2", config.model_copy(update={"salt": "replicate-1"})
                     ) as handle:  # another replicate asks afresh
        client(handle).chat.completions.create(model="gpt-4o-mini", messages=ASK)
        assert handle.meter().total.cache_hits == 0
    assert len(provider.requests) == 3


def test_the_budget_refuses_the_call_that_would_pass_it(provider: FakeOpenAIServer) -> None:
    one_call = price_snapshot().cost("gpt-4o-mini", 4, 4)
    assert one_call is not None
    config = config_for(provider, max_cost_usd=one_call * 1.6)
    with serve_proxy("proxy-budget", config) as handle:
        agent = client(handle)  # default retries: a budget refusal must not be retried
        agent.chat.completions.create(model="gpt-4o-mini", messages=ASK)
        with pytest.raises(openai.RateLimitError) as refused:
            # at least 1,000 output tokens (0.0006 USD) would pass the budget: never sent
            agent.chat.completions.create(model="gpt-4o-mini", messages=ASK, max_tokens=1000)
        agent.chat.completions.create(model="gpt-4o-mini", messages=ASK, max_tokens=1)
        with pytest.raises(openai.RateLimitError):  # now spent: any request is refused
            agent.chat.completions.create(model="gpt-4o-mini", messages=ASK, max_tokens=1)
    assert refused.value.code == "insufficient_quota"
    assert "cost budget" in refused.value.message and "spent" in refused.value.message
    assert len(provider.requests) == 2
    meter = ProxyMeter.model_validate(run_store("proxy-budget").read_json(METER_FILE))
    assert meter.budget_spent and meter.max_cost_usd == pytest.approx(one_call * 1.6)
    assert (meter.total.calls, meter.total.refused_budget) == (2, 2)
    assert meter.total.cost_usd == pytest.approx(one_call + price_snapshot().cost(
        "gpt-4o-mini", 4, 4))


def test_a_budget_needs_every_allowed_model_priced(provider: FakeOpenAIServer) -> None:
    config = ProxyConfig(models={"mystery": "openai/mystery-model"}, max_cost_usd=1.0,
                         api_base=provider.base_url)
    with pytest.raises(InputDataError, match="mystery"), serve_proxy("proxy-unpriced", config):
        pass
    ProxyConfig(models={"mystery": "openai/mystery-model"}).check()  # no budget: fine


def test_refusals_name_what_was_wrong(provider: FakeOpenAIServer) -> None:
    with serve_proxy("proxy-refusals", config_for(provider)) as handle:
        agent = client(handle, max_retries=0)
        with pytest.raises(openai.NotFoundError) as outside:
            agent.chat.completions.create(model="gpt-4o", messages=ASK)
        with pytest.raises(openai.BadRequestError) as streamed:
            agent.chat.completions.create(model="gpt-4o-mini", messages=ASK, stream=True)
        with pytest.raises(openai.BadRequestError) as several:
            agent.chat.completions.create(model="gpt-4o-mini", messages=ASK, n=3)
        with pytest.raises(openai.AuthenticationError) as stranger:
            openai.OpenAI(base_url=handle.base_url, api_key="guess", max_retries=0,
                          http_client=handle.http_client()).models.list()
        meter = handle.meter()
    assert outside.value.code == "model_not_found"
    assert "gpt-4o-mini, small" in outside.value.message
    assert streamed.value.param == "stream" and "stream=false" in streamed.value.message
    assert several.value.param == "n"
    assert stranger.value.code == "invalid_api_key"
    assert provider.requests == []
    assert (meter.refused_model, meter.rejected, meter.unauthorized) == (1, 2, 1)
    assert meter.total.calls == 0


def test_the_agent_tells_the_proxy_its_stage(provider: FakeOpenAIServer) -> None:
    """``POST /v1/medflows/stage``: the run's token, one of s1–s5 (any case); the meter keeps
    the marks in order for the run's per-stage telemetry."""
    with serve_proxy("proxy-stages", config_for(provider)) as handle:
        http, auth = handle.http_client(), {"Authorization": f"Bearer {handle.token}"}
        url = f"{handle.base_url}/medflows/stage"
        said = [http.post(url, json={"stage": s}, headers=auth) for s in ("s1", "S3")]
        bad = [http.post(url, json=b, headers=auth) for b in ({"stage": "s6"}, {}, [1])]
        stranger = http.post(url, json={"stage": "s2"}, headers={"Authorization": "Bearer x"})
        meter = handle.meter()
    assert [r.json() for r in said] == [{"stage": "s1"}, {"stage": "s3"}]
    assert {r.status_code for r in bad} == {400} and stranger.status_code == 401
    assert "s1, s2, s3, s4, s5" in bad[0].json()["error"]["message"]
    assert [m.stage for m in meter.stages] == ["s1", "s3"]
    assert meter.stages[0].at_s <= meter.stages[1].at_s
    assert (meter.rejected, meter.unauthorized, meter.total.calls) == (3, 1, 0)


def test_the_provider_key_reaches_the_provider_and_nothing_else(provider_key: str) -> None:
    raw: list[str] = []
    with FakeOpenAIServer(lambda body: "ok", echo_auth=True) as echoing, \
            serve_proxy("proxy-key", config_for(echoing)) as handle, \
            handle.http_client() as http:
        headers = {"Authorization": f"Bearer {handle.token}"}
        answer = http.post(f"{handle.base_url}/chat/completions", headers=headers,
                           json={"model": "gpt-4o-mini", "messages": ASK})
        raw += [answer.text, json.dumps(dict(answer.headers))]
        assert answer.status_code == 200
        # a hostile provider echoed the credential into its reply: redacted on the way out
        assert answer.json()["choices"][0]["message"]["content"] == "ok\nBearer [REDACTED]"
        assert echoing.headers[-1]["authorization"] == f"Bearer {provider_key}"
    with FakeOpenAIServer(lambda body: "ok", unauthorized=lambda headers: True) as refusing, \
            serve_proxy("proxy-key", config_for(refusing)) as handle, \
            handle.http_client() as http:
        headers = {"Authorization": f"Bearer {handle.token}"}
        failed = http.post(f"{handle.base_url}/chat/completions", headers=headers,
                           json={"model": "gpt-4o-mini", "messages": ASK})
        raw += [failed.text, json.dumps(dict(failed.headers))]
        # the provider's 401 quoted the key: the agent gets a 502 naming the failure, no key
        assert failed.status_code == 502
        assert failed.json()["error"]["type"] == "upstream_error"
        assert "status 401" in failed.json()["error"]["message"]
        assert handle.meter().total.errors == 1
    raw.append(run_store("proxy-key").read_text(METER_FILE))
    assert all(PROVIDER_KEY not in text for text in raw)
    assert "PROVIDERKEY" not in "".join(raw)
