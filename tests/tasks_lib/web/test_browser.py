"""The pages in headless Chromium: ``medflows serve`` (its own process on 127.0.0.1, stopped by
its PID) serves the leaderboard and a run page, the static site opens from disk (``file://``).
Screenshots are kept as test artifacts after the run: under ``$MEDFLOWS_TEST_ARTIFACTS/web/``,
by default ``test-artifacts/web/`` in the checkout (git ignores it)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.ops_support import BIN, free_port, stop
from support.services import wait_healthy

from tasks_lib.report.board import LeaderboardRow
from tasks_lib.web.site import write_site
from tests.tasks_lib.ops.test_deployments import CHROMIUM_FLAGS
from tests.tasks_lib.web.site_ledger import ASSISTANT_TEXT, REPLAYED, TRACED, SiteLedger

pytestmark = pytest.mark.slow  # a served app and a browser: ~20 s


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is missing under CI (scripts/system-packages.txt)")
        pytest.skip("chromium is not installed (scripts/system-packages.txt; make test "
                    "installs)")
    return found


@pytest.fixture(scope="module")
def served(site: SiteLedger, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``medflows serve`` on a free port of 127.0.0.1, reading the fixture's ledger."""
    port = free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen([str(BIN / "medflows"), "serve", "--port", str(port)],
                                env=dict(os.environ), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, lambda: None if proc.poll() is None else log.read_text())
        yield url
    finally:
        stop(proc)


@pytest.fixture
def artifacts() -> Path:
    """Where screenshots are kept."""
    from support.paths import PROJECT_ROOT

    folder = Path(os.environ.get("MEDFLOWS_TEST_ARTIFACTS") or PROJECT_ROOT / "test-artifacts")
    folder /= "web"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _dom(chromium: str, url: str) -> str:
    done = subprocess.run([chromium, *CHROMIUM_FLAGS, "--dump-dom", url], capture_output=True,
                          text=True, timeout=120, check=True)
    return done.stdout


def _shot(chromium: str, url: str, path: Path) -> None:
    subprocess.run([chromium, *CHROMIUM_FLAGS, f"--screenshot={path}", url],
                   capture_output=True, timeout=120, check=True)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000


def test_served_leaderboard_and_run_page(chromium: str, served: str, site: SiteLedger,
                                         artifacts: Path) -> None:
    board_url = f"{served}/pools/{site.qa_pool_id}/v{site.qa_version}.html"
    board = _dom(chromium, board_url)
    for model in REPLAYED:
        assert f"replay:{model}@zero_shot" in board
    assert TRACED in board and "<svg" in board
    if "ci_low" in LeaderboardRow.model_fields:
        assert '<th class="n">CI</th>' in board
        assert re.search(r'<td class="n ci"[^>]*>\[0\.\d+, ', board)
    run = _dom(chromium, f"{served}/runs/{site.traced_run}.html")
    assert ASSISTANT_TEXT in run and 'class="msg role-assistant"' in run
    assert "wc -l /public/items.jsonl" in run
    _shot(chromium, board_url, artifacts / "leaderboard.png")
    _shot(chromium, f"{served}/runs/{site.traced_run}.html", artifacts / "run.png")


def test_static_site_opens_from_disk(chromium: str, site: SiteLedger, tmp_path: Path,
                                     artifacts: Path) -> None:
    written = write_site(tmp_path / "site")
    index = _dom(chromium, written.index_page.as_uri())
    assert f"pools/{site.qa_pool_id}/v{site.qa_version}.html" in index
    board = tmp_path / "site" / "pools" / site.qa_pool_id / f"v{site.qa_version}.html"
    dom = _dom(chromium, board.as_uri())
    assert all(f"replay:{m}@zero_shot" in dom for m in REPLAYED)
    _shot(chromium, board.as_uri(), artifacts / "static-leaderboard.png")
