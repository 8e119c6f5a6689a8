"""The pages served by the MedBench app (in process): index, boards with every agent and the
cost–accuracy panels, a run page with its score card and conversation, the submitter page behind
the submitter's key, and no private reference string on any page."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tasks_lib.report.board import LeaderboardRow
from tests.tasks_lib.web.site_ledger import ASSISTANT_TEXT, REPLAYED, TRACED, SiteLedger

HREF = re.compile(r'href="([^"#]+)"')


@pytest.fixture(scope="module")
def client(site: SiteLedger) -> Iterator[TestClient]:
    from tasks_lib.medbench.service import create_app

    with TestClient(create_app(lambda run_id: None)) as c:
        yield c


def _get(client: TestClient, path: str, **headers: str) -> str:
    response = client.get(path, headers=headers)
    assert response.status_code == 200, (path, response.status_code, response.text[:300])
    assert response.headers["content-type"].startswith("text/html")
    return response.text


def test_index_links_every_pool_and_task(client: TestClient, site: SiteLedger) -> None:
    page = _get(client, "/")
    assert f'href="pools/{site.qa_pool_id}/v{site.qa_version}.html"' in page
    assert 'href="tasks/web-qa.html"' in page and f"pools/{site.mb_pool_id}/v1.html" in page
    assert _get(client, "/index.html") == page


def test_pool_board_lists_agents_runs_and_the_pareto_panels(client: TestClient,
                                                            site: SiteLedger) -> None:
    page = _get(client, f"/pools/{site.qa_pool_id}/v{site.qa_version}.html")
    for model in REPLAYED:
        assert f"replay:{model}@zero_shot" in page
    assert TRACED in page
    assert f'href="../../runs/{site.traced_run}.html"' in page
    assert page.count("<svg") == 3  # all items, medbullets, medqa
    assert "exact_match — medqa" in page and "exact_match — medbullets" in page
    assert "marker area ∝ seconds per item" in page
    if "ci_low" in LeaderboardRow.model_fields:  # the board carries intervals
        assert '<th class="n">CI</th>' in page
        assert re.search(r'<td class="n ci"[^>]*>\[0\.\d+, [01]\.?\d*\]', page)
    else:
        assert '<th class="n">CI</th>' not in page


def test_run_page_shows_card_cases_and_the_conversation(client: TestClient,
                                                        site: SiteLedger) -> None:
    page = _get(client, f"/runs/{site.traced_run}.html")
    assert ASSISTANT_TEXT in page and "wc -l /public/items.jsonl" in page
    assert 'class="msg role-assistant"' in page and 'class="msg role-tool"' in page
    assert "tool call <span class=\"tool\">execute_code</span>" in page
    assert "Per case (14)" in page and "medqa/" in page
    assert "Events (2)" in page and "answers.jsonl" in page
    assert 'href="../tasks/web-qa.html"' in page
    assert "<h3>Per stage</h3>" in page and '<tr><th>S2</th><td class="n">' in page
    replay = _get(client, f"/runs/{site.run_ids[0]}.html")
    assert "This run has no trace." in replay and "exact_match" in replay
    assert "Per stage" not in replay  # no research cell, no stages


def test_submitter_page_needs_the_submitters_key(client: TestClient, site: SiteLedger) -> None:
    path = "/medbench/submissions.html"
    bare = client.get(path)
    assert bare.status_code == 401 and bare.headers["www-authenticate"].startswith("Basic")
    wrong = client.get(path, headers={"X-API-Key": site.submitter_key[:-4] + "xxxx"})
    assert wrong.status_code == 401
    basic = base64.b64encode(f"me:{site.submitter_key}".encode()).decode()
    page = _get(client, path, Authorization=f"Basic {basic}")
    assert "websubmitter" in page and "webmodel" in page and "not scored yet" not in page
    assert _get(client, path, **{"X-API-Key": site.submitter_key}) == page
    assert client.get(f"/runs/{site.submission_run}.html").status_code == 404
    board = _get(client, f"/pools/{site.mb_pool_id}/v1.html")
    assert "websubmitter/webmodel@v1" in board and site.submission_run not in board


def test_unknown_pages_are_404(client: TestClient) -> None:
    for path in ("/runs/nope.html", "/tasks/nope.html", "/pools/nope/v1.html"):
        assert client.get(path).status_code == 404


def _crawl(client: TestClient, key: str) -> dict[str, str]:
    """Every page reachable from the index, and the submitter page (with its key)."""
    pages: dict[str, str] = {}
    todo = ["/index.html"]
    while todo:
        path = todo.pop()
        if path in pages:
            continue
        pages[path] = _get(client, path)
        base = path.rsplit("/", 1)[0] + "/"
        for link in HREF.findall(pages[path]):
            target = re.sub(r"[^/]+/\.\./", "", base + link)
            while "/../" in target:
                target = re.sub(r"[^/]+/\.\./", "", target)
            if target.endswith(".html") and not target.startswith("/medbench/"):
                todo.append(target)
    pages["/medbench/submissions.html"] = _get(client, "/medbench/submissions.html",
                                               **{"X-API-Key": key})
    return pages


def test_no_served_page_holds_a_private_reference(client: TestClient, site: SiteLedger) -> None:
    pages = _crawl(client, site.submitter_key)
    runs = {p for p in pages if p.startswith("/runs/")}
    assert runs == {f"/runs/{r}.html" for r in site.run_ids}
    assert len(site.secrets) > 20
    leaks = [(p, s) for p, text in pages.items() for s in site.secrets if s in text]
    assert leaks == []
    assert not any("private/" in text or "references.jsonl" in text for text in pages.values())
