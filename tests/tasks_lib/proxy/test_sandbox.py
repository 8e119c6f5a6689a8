"""Model calls from a sandbox without network reach the provider only through the run's proxy:
a plain OpenAI client inside gets its reply through the proxy, a direct connection to the
provider is refused and recorded, and no provider key is inside."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.openai_server import FakeOpenAIServer

from tasks_lib.proxy import PROXY_DIR, proxied, serve_proxy
from tasks_lib.sandbox.base import Language, NetworkPolicy, ViolationKind, agent_spec
from tasks_lib.sandbox.monitor import judge

from .conftest import PROVIDER_KEY, config_for

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None,
                                 reason="bwrap missing (Debian package bubblewrap)")

AGENT = """
import os, socket, openai
print("provider key inside:", any("PROVIDERKEY" in v for v in os.environ.values()))
reply = openai.OpenAI(max_retries=0).chat.completions.create(
    model="gpt-4o-mini", messages=[{{"role": "user", "content": "through the proxy"}}])
print("reply:", reply.choices[0].message.content, reply.usage.total_tokens)
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=5)
    print("direct: reached")
except OSError as exc:
    print("direct: refused", exc.errno)
"""


@needs_bwrap
def test_an_agent_in_bwrap_reaches_the_provider_only_through_the_proxy(
        provider: FakeOpenAIServer, tmp_path: Path) -> None:
    from tasks_lib.sandbox.local import BwrapSandbox

    for name in ("public", "workspace"):
        (tmp_path / name).mkdir()
    port = int(provider.base_url.rsplit(":", 1)[1].split("/")[0])
    with serve_proxy("proxy-bwrap", config_for(provider)) as handle:
        spec = proxied(agent_spec(tmp_path / "public", tmp_path / "workspace", []), handle)
        assert spec.env["OPENAI_BASE_URL"] == "http://127.0.0.1:4141/v1"
        assert spec.env["OPENAI_API_KEY"] == handle.token != PROVIDER_KEY
        sandbox = BwrapSandbox(spec)
        try:
            result = sandbox.execute(Language.PYTHON, AGENT.format(port=port), 60)
        finally:
            sandbox.close()
        meter = handle.meter()
    assert result.exit_code == 0, result.stderr
    assert "provider key inside: False" in result.stdout
    assert "reply: proxy the through 6" in result.stdout  # 3 + 3 words (fake usage)
    assert "direct: refused 111" in result.stdout
    assert [m["messages"] for m in provider.requests] == [
        [{"role": "user", "content": "through the proxy"}]]
    assert (meter.total.calls, meter.total.prompt_tokens, meter.total.cost_usd is not None) == (
        1, 3, True)
    if result.monitored:  # the attempt is recorded, the proxy's own port is not
        network = [v.evidence for v in result.observed if v.kind is ViolationKind.NETWORK]
        assert network == [f"connect 127.0.0.1:{port} (no server inside the sandbox) -> "
                           "EINPROGRESS"]


def test_the_monitor_tells_the_proxys_port_from_the_hosts(tmp_path: Path) -> None:
    spec = agent_spec(tmp_path, tmp_path, [])
    start = ['1 execve("/usr/bin/bwrap", [], []) = 0', '7 execve("/usr/bin/python3", [], []) = 0']
    served = [*start,
              '7 bind(3, {sa_family=AF_INET, sin_port=htons(4141), sin_addr=inet_addr('
              '"127.0.0.1")}, 16) = 0', '7 listen(3, 128) = 0',
              '9 connect(5, {sa_family=AF_INET, sin_port=htons(4141), sin_addr=inet_addr('
              '"127.0.0.1")}, 16) = 0',
              f'9 connect(6, {{sa_family=AF_UNIX, sun_path="{PROXY_DIR}/proxy.sock"}}, 110) = 0']
    assert judge(served, spec) == []
    host = [*served, '9 connect(7, {sa_family=AF_INET, sin_port=htons(8000), sin_addr='
                     'inet_addr("127.0.0.1")}, 16) = -1 EINPROGRESS (Operation now in progress)']
    assert [v.evidence for v in judge(host, spec)] == [
        "connect 127.0.0.1:8000 (no server inside the sandbox) -> EINPROGRESS"]
    chosen = [*start, '7 bind(3, {sa_family=AF_INET, sin_port=htons(0), sin_addr=inet_addr('
                      '"127.0.0.1")}, 16) = 0', '7 listen(3, 128) = 0', host[-1]]
    assert judge(chosen, spec) == []  # a server on a port the kernel chose may be that one


def test_the_proxy_is_only_for_sandboxes_without_network(provider: FakeOpenAIServer,
                                                         tmp_path: Path) -> None:
    with serve_proxy("proxy-host-net", config_for(provider)) as handle:
        spec = agent_spec(tmp_path, tmp_path, [], NetworkPolicy.HOST)
        with pytest.raises(ValueError, match="without network"):
            proxied(spec, handle)
