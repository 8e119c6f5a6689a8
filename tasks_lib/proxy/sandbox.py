"""Reaching a run's model proxy from a sandbox that has no network.

:func:`proxied` turns an agent sandbox spec into one whose commands start behind the in-sandbox
launcher (:mod:`tasks_lib.proxy.forward`): the proxy's folder is bound read-only at
:data:`PROXY_DIR`, the launcher serves the sandbox's own loopback at ``127.0.0.1:PORT`` and
forwards to the socket, and the environment names the proxy the way OpenAI clients read it
(``OPENAI_BASE_URL``, and ``OPENAI_API_BASE`` for older clients and litellm) with the run's proxy
token as ``OPENAI_API_KEY``. No provider key and no other route out exist inside: the sandbox's
network stays unshared.
"""

from __future__ import annotations

from tasks_lib.proxy.server import LAUNCHER_NAME, SOCKET_NAME, ProxyHandle
from tasks_lib.sandbox.base import Mount, NetworkPolicy, SandboxSpec

PROXY_DIR = "/run/medflows-proxy"
"""Where the proxy's folder (socket and launcher) appears inside the sandbox."""
PROXY_PORT = 4141
"""Default loopback port of the proxy inside the sandbox."""


def proxied(spec: SandboxSpec, handle: ProxyHandle, port: int = PROXY_PORT) -> SandboxSpec:
    """``spec`` with the proxy reachable at ``http://127.0.0.1:PORT/v1`` inside.

    Raises:
        ValueError: ``spec`` opens the host network (the launcher's port would be the host's,
            and the proxy would not be the only way out).
    """
    if spec.network is not NetworkPolicy.NONE:
        raise ValueError("the model proxy is for sandboxes without network "
                         f"(this one has network={spec.network.value})")
    base_url = f"http://127.0.0.1:{port}/v1"
    # -I ignores PYTHONDONTWRITEBYTECODE: -B, so an image whose standard library has no
    # compiled files does not try to write them onto its read-only root
    launcher = [spec.python, "-I", "-S", "-B", f"{PROXY_DIR}/{LAUNCHER_NAME}", "127.0.0.1",
                str(port), f"{PROXY_DIR}/{SOCKET_NAME}", "--"]
    env = {**spec.env, "OPENAI_BASE_URL": base_url, "OPENAI_API_BASE": base_url,
           "OPENAI_API_KEY": handle.token}
    return spec.model_copy(update={
        "mounts": [*spec.mounts, Mount(host=handle.folder, target=PROXY_DIR)],
        "env": env, "launcher": launcher})
