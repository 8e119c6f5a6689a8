"""Re-running a failed flow run resumes at the failed stage.

The storage root is served by a local filesystem whose writes under ``scores/`` fail while a flag
file exists (an operator-fixable storage fault; no hook in the QA code). The qa-benchmark flow
fails in its score stage; after the flag is removed ``rerun`` retries the same flow run id: no
upstream step runs again (Prefect states and physical writes both counted) and the ledger holds
one row per run and per score.
"""

from __future__ import annotations

import gzip
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import fsspec
import pytest
from fsspec.implementations.local import LocalFileSystem
from sqlalchemy import text

from tasks_lib.ledger import store
from tasks_lib.settings import get_settings, reset_settings

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]
EXPENSIVE = {"ingest", "deidentify", "normalize", "difficulty_filter", "execute_chunk"}
"""Upstream steps cached on inputs + source (cheap lookups and the idempotent publish are not)."""


class FailingScoresFS(LocalFileSystem):
    """Local files; opening ``*/scores/*`` for writing fails while ``FLAG`` exists."""

    protocol = "failscores"
    FLAG: ClassVar[Path | None] = None
    writes: ClassVar[Counter[str]] = Counter()

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        path = str(path)
        return super()._strip_protocol(path.removeprefix("failscores://"))

    def _open(self, path: str, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
        if "w" in mode:
            kind = path.rsplit("/", 1)[-1] if "/scores/" not in path else "score-card"
            if kind == "score-card" and self.FLAG is not None and self.FLAG.exists():
                raise OSError(f"injected storage fault writing {path}")
            self.writes[kind] += 1
        return super()._open(path, mode, *args, **kwargs)


@pytest.fixture
def failing_storage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    fsspec.register_implementation("failscores", FailingScoresFS, clobber=True)
    flag = tmp_path / "fail-scores"
    flag.touch()
    monkeypatch.setattr(FailingScoresFS, "FLAG", flag)
    FailingScoresFS.writes.clear()
    monkeypatch.setenv("MEDFLOWS_STORAGE_URL", f"failscores://{tmp_path / 'storage'}")
    reset_settings()
    yield flag
    monkeypatch.undo()
    reset_settings()


DATASETS = ["medbullets", "medqa"]
"""Two of the nine QA cards: every construct step runs per dataset, so two prove the resume."""


def _replay_file(tmp_path: Path) -> str:
    src = get_settings().data_root / "medagentsbench" / "predictions" / "hard.csv.gz"
    with gzip.open(src, "rt") as fh:
        lines = fh.read().splitlines()
    keep = [lines[0]] + [ln for ln in lines[1:]
                         if ln.split(",")[2:4] in (["gpt-4o-mini", "zero_shot"],
                                                   ["o3-mini", "zero_shot"])]
    out = tmp_path / "replay.csv"
    out.write_text("\n".join(keep) + "\n")
    return str(out)


def _task_runs_since(root_id: Any, since: datetime) -> Counter[tuple[str, str]]:
    """(step function, state name) of every step run created since ``since`` under
    ``root_id`` (its sub-flow runs included)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterId,
        FlowRunFilterParentFlowRunId,
    )

    with get_client(sync_client=True) as client:
        ids, frontier = [root_id], [root_id]
        while frontier:
            children = client.read_flow_runs(flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=frontier)))
            frontier = [c.id for c in children]
            ids += frontier
        runs: list[Any] = []
        while batch := client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=ids)), limit=200,
                offset=len(runs)):
            runs += batch
    return Counter((r.task_key.rsplit("-", 1)[0], r.state_name or "")
                   for r in runs if r.created is not None and r.created >= since)


def test_failed_score_stage_resumes_without_recomputing_upstream(failing_storage: Path,
                                                                 tmp_path: Path) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    from flows.pipeline import qa_benchmark
    from tasks_lib.ops import rerun_flow_run

    pool_id = f"rerun-{uuid.uuid4().hex[:6]}"
    with pytest.raises(OSError, match="injected storage fault"):
        qa_benchmark(pool_id=pool_id, per_dataset=3, replay=_replay_file(tmp_path),
                     datasets=DATASETS)
    with get_client(sync_client=True) as client:
        [root] = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            name=FlowRunFilterName(any_=[f"qa-benchmark-{pool_id}"])))
    assert root.state is not None and root.state.is_failed()
    first_writes = Counter(FailingScoresFS.writes)
    assert first_writes["answers.jsonl"] == 2 and first_writes["manifest.json"] == 1
    assert first_writes["score-card"] == 0
    run_ids = [r.run_id for r in store.runs(pool_id=pool_id)]
    assert len(run_ids) == 2 and store.scores_for(run_ids) == []

    failing_storage.unlink()  # the operator fixes the storage
    since = datetime.now(UTC)
    outcome = rerun_flow_run(str(root.id))

    assert (outcome.flow_run_id, outcome.state) == (str(root.id), "COMPLETED")
    with get_client(sync_client=True) as client:
        again = client.read_flow_run(root.id)
    assert again.run_count == 2 and again.state is not None and again.state.is_completed()
    steps = _task_runs_since(root.id, since)
    assert {name for (name, state) in steps if name in EXPENSIVE and state != "Cached"} == set()
    assert steps[("ingest", "Cached")] == len(DATASETS)
    assert steps[("execute_chunk", "Cached")] == 2
    # the failed stage re-executed: one chunk holding both runs; the report reads the ledger
    assert steps[("score_chunk_step", "Completed")] == 1
    assert sum(n for (name, _), n in steps.items() if name == "score_chunk_step") == 1
    writes = FailingScoresFS.writes - first_writes
    assert writes["answers.jsonl"] == 0  # no agent ran again
    assert writes["score-card"] == 2
    [pool_row] = store.pools(pool_id=pool_id)  # the idempotent re-publish made no new version
    assert pool_row.version == 1

    assert sorted(r.run_id for r in store.runs(pool_id=pool_id)) == sorted(run_ids)
    assert len(store.scores_for(run_ids)) == 2
    with store.get_engine().connect() as conn:
        dups = conn.execute(text("SELECT COUNT(*) FROM (SELECT run_id, evaluator_version FROM "
                                 "scores GROUP BY run_id, evaluator_version HAVING COUNT(*) > 1)"
                                 " d")).scalar_one()
    assert dups == 0

    _assert_artifacts(pool_id)

    stage = rerun_flow_run(str(root.id), stage="score")
    assert (stage.flow_name, stage.state) == ("score-runs", "COMPLETED")
    assert len(store.scores_for(run_ids)) == 2

    from typer.testing import CliRunner

    from flows.cli import ops  # noqa: F401  (registers the commands)
    from flows.cli.groups import app

    bad = CliRunner().invoke(app, ["rerun", str(root.id), "--stage", "judge"])
    assert bad.exit_code == 2
    assert "no stage 'judge'; stages of this run: construct-qa, execute-qa, qa-benchmark, " \
           "report, score-runs" in bad.output


def _assert_artifacts(pool_id: str) -> None:
    """construct → pool manifest summary; report → leaderboard table and markdown with links."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    keys = [f"pool-{pool_id}", f"leaderboard-{pool_id}-v1", f"report-{pool_id}-v1"]
    with get_client(sync_client=True) as client:
        found = {a.key: a for a in client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=keys)))}
    assert set(found) == set(keys)
    assert (found[keys[0]].type, found[keys[1]].type, found[keys[2]].type) == (
        "markdown", "table", "markdown")
    assert "cost_accuracy.png" in str(found[keys[2]].data)
    assert "gpt-4o-mini" in str(found[keys[1]].data)
