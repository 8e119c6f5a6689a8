"""The one construct flow (issue 22): ``kit.build → write vN → exploit audit → publish`` for any
kit's task ids (``flows.construct.construct_pool``), the per-kit flows being the same two calls,
and ``medflows pool build --task`` falling back to it for a kit no alias serves (the toy
track)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("prefect_harness")


@pytest.fixture(scope="module", autouse=True)
def _own_ledger(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[None]:
    """A storage root and ledger of this module's own (what the ledger holds per pool is
    asserted)."""
    from support.isolated import own_storage_and_ledger

    with own_storage_and_ledger(tmp_path_factory.mktemp("construct-pool")):
        yield


def test_an_imaging_task_is_built_audited_and_published_as_construct_imaging_does(
        tmp_path: Path) -> None:
    from flows.construct import construct_imaging, construct_pool
    from tasks_lib.imaging.types import PoolManifest
    from tasks_lib.ledger import store
    from tasks_lib.storage import Storage

    built = construct_pool(["brain-lesion-vqa"])
    m = built.manifest
    assert isinstance(m, PoolManifest)
    assert (m.pool_id, str(m.track), m.version, built.n_items) == (
        "brain-lesion-vqa", "vqa", 1, len(m.cases))
    assert json.loads(Storage(built.url).read_text("audit.json"))["report"]["clean"]
    [row] = store.pools(pool_id="brain-lesion-vqa")
    assert (row.kind, row.version, row.content_hash, row.n_items) == (
        "pool", 1, m.content_hash, len(m.cases))
    # the per-kit flow is the same build: same content, same (untouched) version
    again = construct_imaging("brain-lesion-vqa")
    assert again == f"{built.url.rstrip('/')}/manifest.json"
    assert [r.version for r in store.pools(pool_id="brain-lesion-vqa")] == [1]


def test_a_medbench_subset_is_built_and_published(tmp_path: Path) -> None:
    from flows.construct import construct_pool
    from tasks_lib.ledger import store
    from tasks_lib.medbench.items import MedBenchManifest

    built = construct_pool(["medqa-choice", "dicom-string"], pool_id="cp-mb",
                           out=str(tmp_path / "mb"))
    m = built.manifest
    assert isinstance(m, MedBenchManifest)
    assert sorted(m.tasks) == ["dicom-string", "medqa-choice"] and m.n_items == built.n_items
    assert built.url.rstrip("/").endswith("mb")
    [row] = store.pools(pool_id="cp-mb")
    assert (row.kind, row.track, row.n_items) == ("pool", "medbench", m.n_items)


def test_an_unclean_audit_stops_the_build_unless_overridden(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.construct import construct_pool
    from tasks_lib import pool_publish
    from tasks_lib.audit import require_clean
    from tasks_lib.audits.pool import pool_info
    from tasks_lib.audits.report import AuditReport, Finding, GateRecord, Severity
    from tasks_lib.errors import InputDataError
    from tasks_lib.ledger import store

    def unclean_gate(pool_url: str, override: str | None = None) -> GateRecord:
        info = pool_info(pool_url)
        report = AuditReport(
            pool_url=pool_url, pool_id=info.pool_id, version=info.version,
            pool_hash=info.pool_hash, track=info.track, created_at=datetime.now(UTC),
            findings=[Finding(check="answer_key", passed=False, severity=Severity.ERROR,
                              rule="no reference in public/")])
        return require_clean(report, override)

    monkeypatch.setattr(pool_publish, "audit_gate", unclean_gate)
    with pytest.raises(InputDataError, match="the exploit audit is not clean: answer_key"):
        construct_pool(["ldct-iqa"], out=str(tmp_path / "refused"))
    assert [r.kind for r in store.pools(pool_id="ldct-iqa")] == ["pending"]
    built = construct_pool(["ldct-iqa"], out=str(tmp_path / "refused"),
                           audit_override="known leak, accepted for the test")
    assert [r.kind for r in store.pools(pool_id="ldct-iqa")] == ["pool"]
    assert str(built.manifest.track) == "challenge"


def test_a_kit_builds_no_pool_by_default_and_checks_its_options() -> None:
    from evaluators.core import Track
    from flows.construct import construct_pool
    from tasks_lib.errors import InputDataError
    from tasks_lib.tracks.base import BuildRequest, TrackKit

    class Bare(TrackKit):
        track = Track("bare")

        def score(self, run: object, submission: object) -> object:  # type: ignore[override]
            raise NotImplementedError

        def baselines(self, pool_url: object, out: object) -> object:  # type: ignore[override]
            raise NotImplementedError

    with pytest.raises(InputDataError, match="the bare kit builds no pools"):
        Bare().build(BuildRequest(tasks=["x"]))
    with pytest.raises(InputDataError, match="unknown task id"):
        construct_pool(["no-such-task"])
    with pytest.raises(InputDataError, match="name tasks of one kit"):
        construct_pool(["brain-lesion-vqa", "brain-tissue-seg"])
    with pytest.raises(InputDataError, match="not a vqa build option"):
        construct_pool(["brain-lesion-vqa"], options={"n_patients": 3})


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap sandbox not installed")
def test_pool_build_task_falls_back_to_the_generic_flow_for_a_kit_without_a_route() -> None:
    from prefect.logging.configuration import setup_logging
    from support.cli import invoke, invoke_json
    from support.kit_pools import with_test_kits

    from flows.cli.routing import BUILD_ROUTES, serves
    from tasks_lib.ledger import store

    setup_logging()
    invoke("--help")  # registers every command module's routes
    with with_test_kits():
        assert not serves(BUILD_ROUTES, "toy_slides") and serves(BUILD_ROUTES, "vqa")
        built = invoke_json("pool", "build", "--task", "toy-slides")
        assert set(built) == {"pool_id", "version", "url", "content_hash", "n_items", "track"}
        assert (built["pool_id"], built["track"], built["n_items"]) == (
            "toy-slides", "toy_slides", 9)
        [row] = store.pools(pool_id="toy-slides")
        assert (row.kind, row.content_hash) == ("pool", built["content_hash"])
        out = invoke("pool", "build", "--task", "toy-slides", "--n-patients", "3")
        assert out.exit_code == 2 and "--n-patients: not an option here" in out.stderr
