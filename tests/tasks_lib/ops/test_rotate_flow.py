"""The rotate flow on a real constructed pool: version-locked subsets, the active pointer, the
ledger, and the QA flows running unchanged on the subset."""

from __future__ import annotations

import json
import uuid
from collections import Counter

import pytest
from typer.testing import CliRunner

from flows.pipeline import HARD_MODELS
from tasks_lib.ledger import store
from tasks_lib.qa.pool import load_pool
from tasks_lib.qa.types import PublicQAItem
from tasks_lib.rotation import active_subset, allocate
from tasks_lib.settings import get_settings
from tasks_lib.storage import Storage

pytestmark = pytest.mark.usefixtures("prefect_harness")
QA_SOURCE = get_settings().data_root / "medagentsbench"
HARD = str(QA_SOURCE / "predictions" / "hard.csv.gz")


def stratum_of(item: PublicQAItem) -> str:
    """The QA kit's default stratum of a question: ``dataset/meta_info``."""
    return f"{item.dataset}/{item.meta_info or '-'}"


def test_rotation_subsets_are_version_locked_and_run_through_qa_flows() -> None:
    from flows.construct import construct_qa
    from flows.execute import execute_qa
    from flows.rotate import rotate_pool
    from flows.score import score_qa

    pool_id, subset_id = f"rot-{uuid.uuid4().hex[:6]}", f"sub-{uuid.uuid4().hex[:6]}"
    parent = construct_qa(pool_id=pool_id, datasets=["medqa", "pubmedqa"], source=str(QA_SOURCE),
                          models=HARD_MODELS, per_dataset=8, meld=False, auto_approve=True)
    items = load_pool(Storage(parent.url)).items
    available = Counter(stratum_of(it) for it in items)

    v1 = rotate_pool(pools=[pool_id], size=7, seed=11, subset_id=subset_id)
    assert (v1.version, v1.n_items, sum(v1.strata.values())) == (1, 7, 7)
    assert v1.strata_available == dict(sorted(available.items()))
    assert v1.strata == {k: n for k, n in sorted(allocate(dict(available), 7).items()) if n}
    sub = load_pool(Storage(v1.url))
    assert sub.manifest.pool_id == subset_id and sub.manifest.version == 1
    assert Counter(stratum_of(it) for it in sub.items) == Counter(v1.strata)
    assert set(sub.references) == {f"{it.dataset}/{it.realidx}" for it in sub.items}
    assert [p.pool_id for p in v1.parents] == [pool_id]

    same = rotate_pool(pools=[pool_id], size=7, seed=11, subset_id=subset_id)
    assert same == v1  # identical inputs → identical subset, same version and date
    v2 = rotate_pool(pools=[f"{pool_id}@v{parent.manifest.version}"], size=7, seed=12,
                     subset_id=subset_id)
    assert v2.version == 2 and v2.content_hash != v1.content_hash
    assert active_subset(subset_id) == v2
    assert sorted(r.version for r in store.pools(pool_id=subset_id, kind="subset")) == [1, 2]
    assert load_pool(Storage(v1.url)).manifest.content_hash == v1.content_hash
    [row] = store.pools(pool_id=subset_id, version=2)
    assert row.kind == "subset" and json.loads(row.parents_json)[0]["pool_id"] == pool_id

    runs = execute_qa(pool=v2.url, replay=HARD, replay_models=["gpt-4o"],
                      replay_methods=["zero_shot"])
    cards = score_qa(pool=v2.url)
    assert len(runs) == len(cards) == 1
    assert (cards[0].task_id, cards[0].pool_hash) == (subset_id, v2.content_hash)
    [run_row] = store.runs(run_id=runs[0].run_id)
    assert (run_row.pool_id, run_row.pool_version, run_row.n_items) == (subset_id, 2, 7)

    result = CliRunner().invoke(_app(), ["pool", "rotate", "--pools", pool_id, "--size", "7",
                                         "--seed", "11", "--subset-id", subset_id, "--json"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.output)
    assert (printed["subset_id"], printed["version"]) == (subset_id, 1)
    assert (printed["content_hash"], printed["strata"]) == (v1.content_hash, v1.strata)

    clash = CliRunner().invoke(_app(), ["pool", "rotate", "--pools", pool_id, "--size", "3",
                                        "--seed", "1", "--subset-id", pool_id])
    assert clash.exit_code == 2 and "is the name of a constructed pool" in clash.output


def test_unknown_pool_is_a_clear_cli_error() -> None:
    result = CliRunner().invoke(_app(), ["pool", "rotate", "--pools", "no-such-pool",
                                         "--size", "3", "--seed", "1"])
    assert result.exit_code == 2
    assert "no-such-pool: no such pool version in the ledger" in result.output


def _app():  # type: ignore[no-untyped-def]
    from flows.cli import ops  # noqa: F401  (registers commands)
    from flows.cli.groups import app

    return app
