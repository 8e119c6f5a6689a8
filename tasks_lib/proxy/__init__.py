"""The metered model proxy: one run's OpenAI-compatible endpoint in front of the call layer.

An agent that is not medflows' own (an outside program or container in a sandbox) reaches models
only through its run's proxy: :func:`serve_proxy` serves it on a Unix socket,
:func:`proxied` makes it reachable from a sandbox without network, the run's meter
(:class:`ProxyMeter`) records calls, tokens, cost and refusals and enforces the cost budget.
See docs/proxy.md.
"""

from tasks_lib.proxy.config import ProxyConfig
from tasks_lib.proxy.meter import METER_FILE, ModelUsage, ProxyMeter
from tasks_lib.proxy.sandbox import PROXY_DIR, PROXY_PORT, proxied
from tasks_lib.proxy.server import ProxyHandle, serve_proxy

__all__ = ["METER_FILE", "PROXY_DIR", "PROXY_PORT", "ModelUsage", "ProxyConfig", "ProxyHandle",
           "ProxyMeter", "proxied", "serve_proxy"]
