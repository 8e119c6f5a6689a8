"""The static site (``write_site``): the same pages as files whose every relative link resolves
on disk, scoped to the selected runs, with no private reference string on any page."""

from __future__ import annotations

import re
from pathlib import Path

from tasks_lib.web.site import write_site
from tests.tasks_lib.web.site_ledger import ASSISTANT_TEXT, REPLAYED, SiteLedger

HREF = re.compile(r'(?:href|src)="([^"#]+)"')


def _links_resolve(out: Path) -> list[str]:
    """Relative links of every page whose target file is missing."""
    missing = []
    for page in out.rglob("*.html"):
        for link in HREF.findall(page.read_text(encoding="utf-8")):
            if not (page.parent / link).resolve().is_file():
                missing.append(f"{page.relative_to(out)} → {link}")
    return missing


def test_the_whole_ledger_as_a_site(site: SiteLedger, tmp_path: Path) -> None:
    written = write_site(tmp_path / "site")
    out = tmp_path / "site"
    assert written.index_page == out / "index.html"
    assert {f"runs/{r}.html" for r in site.run_ids} <= set(written.pages)
    assert f"runs/{site.submission_run}.html" not in written.pages
    assert written.skipped == [f"run {site.submission_run}: a MedBench submission (its "
                               "submitter's)"]
    assert {"index.html", "style.css", "tasks/web-qa.html",
            f"pools/{site.qa_pool_id}/v{site.qa_version}.html"} <= set(written.pages)
    assert "medbench/submissions.html" not in written.pages
    assert _links_resolve(out) == []
    board = (out / "pools" / site.qa_pool_id / f"v{site.qa_version}.html").read_text()
    assert all(f"replay:{m}@zero_shot" in board for m in REPLAYED)
    assert "my MedBench submissions" not in board  # served only
    assert ASSISTANT_TEXT in (out / "runs" / f"{site.traced_run}.html").read_text()
    texts = {p: p.read_text(encoding="utf-8") for p in out.rglob("*") if p.is_file()}
    assert [(p.name, s) for p, t in texts.items() for s in site.secrets if s in t] == []


def test_a_pool_site_holds_that_pool_only(site: SiteLedger, tmp_path: Path) -> None:
    written = write_site(tmp_path / "pool", pool=site.qa_pool)
    runs = {p for p in written.pages if p.startswith("runs/")}
    assert runs == {f"runs/{r}.html" for r in site.run_ids}
    assert not any(site.mb_pool_id in p for p in written.pages) and written.skipped == []
    assert _links_resolve(tmp_path / "pool") == []
    one = write_site(tmp_path / "one", run_ids=[site.traced_run])
    assert [p for p in one.pages if p.startswith("runs/")] == [f"runs/{site.traced_run}.html"]
    assert _links_resolve(tmp_path / "one") == []


def test_report_html_writes_the_site_beside_the_report(site: SiteLedger, tmp_path: Path) -> None:
    from support.cli import invoke_json

    out = invoke_json("report", "--pool", site.qa_pool, "--html", str(tmp_path / "html"),
                      "--json")
    index = Path(out["site"])
    assert index == tmp_path / "html" / "index.html" and index.is_file()
    board = (tmp_path / "html" / "pools" / site.qa_pool_id / f"v{site.qa_version}.html")
    assert all(f"replay:{m}@zero_shot" in board.read_text() for m in REPLAYED)
    assert {r["agent_id"] for r in out["rows"]} >= {f"replay:{m}@zero_shot" for m in REPLAYED}
    assert _links_resolve(tmp_path / "html") == []
