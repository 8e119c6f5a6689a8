"""Fixtures of the operations tests (helpers live in ``ops_support``)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest
from support.ops_support import BIN, PrefectServer, free_port, stop


@pytest.fixture(scope="module")
def prefect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrefectServer]:
    """``prefect server start`` on a free 127.0.0.1 port with its own home and database."""
    home = tmp_path_factory.mktemp("prefect-server")
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_API_URL": api,
           "PREFECT_UI_API_URL": api, "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{home / 'prefect.db'}",
           "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "2"}
    log = (home / "server.log").open("wb")
    proc = subprocess.Popen([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1",
                             "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"prefect server exited: {(home / 'server.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        else:
            pytest.fail("prefect server did not answer within 120 s")
        yield PrefectServer(api, f"http://127.0.0.1:{port}", env, home)
    finally:
        stop(proc)
        log.close()


