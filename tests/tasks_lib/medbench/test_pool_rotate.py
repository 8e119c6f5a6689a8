"""``medflows pool rotate`` on a MedBench pool (under the Prefect test harness): the one rotate
flow with the MedBench kit's units (base items) and strata (task/specialty) writes a pool-shaped
MedBench subset, the very subset ``medflows medbench rotate`` (an alias) draws with the same
seed; a stratum field MedBench items lack is refused with ``error:`` (exit 2)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tasks_lib.medbench.items import base_id, read_manifest, read_public_items

pytestmark = pytest.mark.usefixtures("prefect_harness", "private_storage")
TASKS = ["medqa-choice", "dicom-string", "safety-open", "lesion-course"]


def _app():  # type: ignore[no-untyped-def]
    from flows.cli import medbench, ops  # noqa: F401  (registers the commands)
    from flows.cli.groups import app

    return app


def test_pool_rotate_draws_a_medbench_subset(tmp_path: Path) -> None:
    from tasks_lib.medbench.pool import build_task, publish
    from tasks_lib.pool_publish import record_version

    pool_id, tag = "mbrot" + uuid.uuid4().hex[:6], uuid.uuid4().hex[:6]
    url, manifest = publish(pool_id, str(tmp_path / "pool" / "v1"),
                            {t: build_task(t) for t in TASKS}, seed=0)
    record_version.fn(url, manifest, manifest.n_items)
    bases = {t: {base_id(it.item_id) for it in read_public_items(url) if it.task_id == t}
             for t in TASKS}

    from flows.medbench import rotate_medbench  # what `medflows medbench rotate` runs

    short = read_manifest(rotate_medbench(pool_id, 6, 3, "b" + tag))
    got = CliRunner().invoke(_app(), ["pool", "rotate", "--pools", pool_id, "--size", "6",
                                      "--seed", "3", "--subset-id", "a" + tag, "--json"])
    assert got.exit_code == 0, got.output
    subset = json.loads(got.stdout)
    assert subset["parents"][0]["pool_id"] == pool_id
    assert subset["stratify_by"] == ["task", "specialty"]
    assert {s.split("/")[0] for s in subset["strata"]} <= set(TASKS)
    sub = read_manifest(subset["url"])  # pool-shaped: a MedBench manifest naming its parent
    assert (sub.pool_id, sub.parents) == ("a" + tag, [f"{pool_id}@v1"])
    drawn = {base_id(it.item_id) for it in read_public_items(subset["url"])}
    assert len(drawn) == 6 and drawn <= set().union(*bases.values())
    # every option shuffle of a drawn question comes with it
    shuffles = [it for it in read_public_items(url) if base_id(it.item_id) in drawn]
    assert sub.n_items == len(shuffles)
    assert sub.content_hash == short.content_hash == subset["content_hash"]  # the shortcut's
    from tasks_lib.storage import Storage  # a drawn multimodal item brings its image along

    pictured = [it.image for it in read_public_items(subset["url"]) if it.image]
    assert pictured and all(Storage(subset["url"]).exists(image) for image in pictured)

    other = CliRunner().invoke(_app(), ["pool", "rotate", "--pools", f"{pool_id},{pool_id}",
                                        "--size", "6", "--seed", "4", "--subset-id", "a" + tag,
                                        "--json"])
    assert other.exit_code == 0, other.output
    moved = json.loads(other.stdout)
    assert (moved["version"], moved["parents"][0]["pool_id"]) == (2, pool_id)
    assert moved["content_hash"] != subset["content_hash"]
    strata = CliRunner().invoke(_app(), ["pool", "rotate", "--pools", pool_id, "--size", "6",
                                         "--stratify-by", "dataset"])
    assert strata.exit_code == 2 and "known: task, specialty" in strata.output
