"""Serve one run's model proxy: :func:`serve_proxy` starts it, yields a :class:`ProxyHandle`
and stops it on the way out.

The proxy listens on a Unix socket in a fresh folder of its own (``proxy.sock``, beside a copy of
the in-sandbox launcher ``forward.py``): only a process that can open that path reaches it, so a
sandbox reaches it only when the folder is bound in (:func:`tasks_lib.proxy.sandbox.proxied`),
and it also needs the run's token. uvicorn serves the app (:mod:`tasks_lib.proxy.app`) on a
thread of this process, so the calls share the process's call layer (connection slots, rate
caps, single flight) with medflows' own agents.

On exit (whatever happened) the server is asked to stop, given
:data:`STOP_TIMEOUT_S` for requests in flight, then forced; the meter is stored at
``runs/<run_id>/calls/proxy.json`` and the cache keys the run used at ``calls/proxy.txt`` (so a
replay capsule carries them), and the folder is removed.
"""

from __future__ import annotations

import contextvars
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn

from tasks_lib.llm import LiteLLMCompletion
from tasks_lib.llm_cache import call_journal, write_journal
from tasks_lib.llm_scope import call_scope
from tasks_lib.proxy.app import build_app
from tasks_lib.proxy.config import ProxyConfig
from tasks_lib.proxy.meter import METER_FILE, Meter, ProxyMeter
from tasks_lib.records import run_store

SOCKET_NAME = "proxy.sock"
LAUNCHER_NAME = "forward.py"
JOURNAL_PART = "proxy"
"""``calls/proxy.txt``: the cache keys of the proxy's calls."""
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0
HOST_BASE_URL = "http://medflows-proxy/v1"
"""Base URL for a client on the host that talks over the socket (the host name is not used)."""


class ProxyHandle:
    """A running proxy: where it listens, its token, its meter.

    Args:
        folder: The proxy's folder (socket and launcher).
        token: The run's proxy token.
        meter: The live meter.
    """

    def __init__(self, folder: Path, token: str, meter: Meter) -> None:
        self.folder, self.token, self._meter = folder, token, meter

    @property
    def socket_path(self) -> Path:
        """The Unix socket the proxy listens on."""
        return self.folder / SOCKET_NAME

    @property
    def base_url(self) -> str:
        """Base URL for an OpenAI client using :meth:`http_client` (over the socket)."""
        return HOST_BASE_URL

    def http_client(self, timeout_s: float = 120.0) -> httpx.Client:
        """An HTTP client that reaches the proxy over its socket (e.g. ``openai.OpenAI(
        base_url=h.base_url, api_key=h.token, http_client=h.http_client())``)."""
        return httpx.Client(transport=httpx.HTTPTransport(uds=str(self.socket_path)),
                            timeout=timeout_s)

    def meter(self) -> ProxyMeter:
        """The meter as it stands (final once the proxy has stopped)."""
        return self._meter.snapshot()


def _run_context(salt: str) -> tuple[contextvars.Context, set[str]]:
    """A context holding the run's own call scope and call journal (never the caller's: the
    proxy's calls are counted and journalled apart from the host's own)."""
    with call_scope(salt), call_journal() as keys:
        return contextvars.copy_context(), keys


def _start(server: uvicorn.Server, thread: threading.Thread, timeout_s: float) -> None:
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            thread.join(STOP_TIMEOUT_S)
            raise RuntimeError(f"the model proxy did not start within {timeout_s:g} s")
        time.sleep(0.02)


def _stop(server: uvicorn.Server, thread: threading.Thread) -> None:
    server.should_exit = True
    thread.join(STOP_TIMEOUT_S)
    if thread.is_alive():
        server.force_exit = True
        thread.join(STOP_TIMEOUT_S)


@contextmanager
def serve_proxy(run_id: str, config: ProxyConfig,
                start_timeout_s: float = START_TIMEOUT_S) -> Iterator[ProxyHandle]:
    """Serve the model proxy of run ``run_id`` for the duration of the block.

    Raises:
        InputDataError: A budget with an allowed model the price snapshot lacks.
        RuntimeError: The server did not start within ``start_timeout_s``.
    """
    config.check()
    door = LiteLLMCompletion.for_run({"api_base": config.api_base} if config.api_base else {},
                                     config.options)
    meter, token = Meter(run_id, config.max_cost_usd), f"medflows-proxy-{secrets.token_hex(16)}"
    context, keys = _run_context(config.salt)
    folder = Path(tempfile.mkdtemp(prefix="medflows-proxy-"))
    folder.chmod(0o755)  # a container's user may differ from ours; the token is the gate
    shutil.copyfile(Path(__file__).with_name(LAUNCHER_NAME), folder / LAUNCHER_NAME)
    app = build_app(config, door, meter, token, context)
    server = uvicorn.Server(uvicorn.Config(
        app, uds=str(folder / SOCKET_NAME), log_level="warning", access_log=False,
        # No logging config of uvicorn's own: dictConfig in a library would shut down the
        # process's handlers (Prefect's console handler among them) for everything after.
        log_config=None, lifespan="off", ws="none",
        timeout_graceful_shutdown=int(STOP_TIMEOUT_S)))
    thread = threading.Thread(target=server.run, name=f"medflows-proxy-{run_id}", daemon=True)
    try:
        _start(server, thread, start_timeout_s)
        yield ProxyHandle(folder, token, meter)
    finally:
        _stop(server, thread)
        run = run_store(run_id)
        run.write_json(METER_FILE, meter.snapshot())
        write_journal(run, JOURNAL_PART, keys)
        shutil.rmtree(folder, ignore_errors=True)
