"""Settings only: the rotate, execute and score flows keep their ledger on PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import text

from tasks_lib.ledger import store
from tasks_lib.settings import get_settings, reset_settings

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]


@pytest.fixture
def postgres_ledger(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("MEDFLOWS_LEDGER_URL", postgres_url)
    reset_settings()
    yield postgres_url
    monkeypatch.undo()
    reset_settings()


def test_rotation_runs_and_scores_land_in_postgres(postgres_ledger: str) -> None:
    from support.ops_support import publish_test_pool

    from flows.execute import execute_qa
    from flows.rotate import rotate_pool
    from flows.score import score_qa

    assert get_settings().ledger_url == postgres_ledger
    pool_id, subset_id = f"pg-{uuid.uuid4().hex[:6]}", f"pg-sub-{uuid.uuid4().hex[:6]}"
    publish_test_pool(pool_id, {"medqa": 7, "pubmedqa": 3})
    subset = rotate_pool(pools=[pool_id], size=6, seed=5, subset_id=subset_id)
    hard = get_settings().data_root / "medagentsbench" / "predictions" / "full.csv.gz"
    runs = execute_qa(pool=subset.url, replay=str(hard), replay_models=["gpt-4o-mini"])
    cards = score_qa(pool=subset.url)

    with store.get_engine(postgres_ledger).connect() as conn:
        assert conn.execute(text("SELECT current_database()")).scalar_one() in postgres_ledger
        pools = conn.execute(text("SELECT pool_id, kind FROM pools ORDER BY kind")).all()
        run_rows = conn.execute(text("SELECT pool_id, pool_version FROM runs")).all()
        n_scores = conn.execute(text("SELECT COUNT(*) FROM scores")).scalar_one()
    assert [tuple(p) for p in pools] == [(pool_id, "pool"), (subset_id, "subset")]
    assert [tuple(r) for r in run_rows] == [(subset_id, 1)] * len(runs)
    assert n_scores == len(cards) == len(runs) >= 1
