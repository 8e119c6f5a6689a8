"""Papercut (issue #26): ``medflows pool rotate`` on a pool that was not QA or MedBench answered
with a Prefect traceback and ``pool_id: Field required`` (main 5afae3e). Rotation is generic
now (tests/tasks_lib/rotation/test_every_pool.py rotates the shipped imaging, challenge and RWE
pools); here a newcomer's own folder pool rotates, and what cannot be rotated is one ``error:``
line, exit 2, with nothing written: a subset id that is not a name, a pool that is not
published, and a pool of another track given to a track's alias (``medbench rotate``).

Data: scikit-image's ``coins`` crops (:func:`tests.tasks_lib.imaging.test_ingest.png_folder`).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from evaluators.core import InputDataError
from tasks_lib.ledger import store
from tasks_lib.settings import get_settings
from tests.tasks_lib.imaging.test_ingest import png_folder

pytestmark = pytest.mark.usefixtures("prefect_harness")


def _cli(*args: str) -> Result:
    from flows.cli import imaging, ops  # noqa: F401  (register the commands)
    from flows.cli.groups import app

    return CliRunner().invoke(app, list(args))


@pytest.fixture(scope="module")
def folder_pool(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A one-label segmentation pool built from a folder with the CLI; its task id."""
    root = tmp_path_factory.mktemp("rotate-byo")
    task_id = f"byo-rot-{uuid.uuid4().hex[:6]}"
    built = _cli("pool", "build", "imaging", "--from", str(png_folder(root / "coins")),
                 "--track", "segmentation", "--task-id", task_id, "--out", str(root / "pool"))
    assert built.exit_code == 0, built.output
    return task_id


def _one_error(res: Result) -> str:
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert res.stdout == ""
    return lines[0]


def test_a_folder_pool_rotates(folder_pool: str) -> None:
    subset_id = f"rot-{uuid.uuid4().hex[:6]}"
    res = _cli("pool", "rotate", "--pools", folder_pool, "--size", "1", "--seed", "1",
               "--subset-id", subset_id, "--json")
    assert res.exit_code == 0, res.output
    subset = json.loads(res.stdout)
    assert (subset["subset_id"], subset["n_items"], subset["strata"]) == (subset_id, 1,
                                                                           {"all": 1})
    [row] = store.pools(pool_id=subset_id)
    assert (row.kind, row.track) == ("subset", "segmentation")


@pytest.mark.parametrize("bad", ["../escaped", "a/b", "", "-dash"])
def test_a_subset_id_that_is_not_a_name_is_one_error_line(folder_pool: str, bad: str) -> None:
    res = _cli("pool", "rotate", "--pools", folder_pool, "--size", "1", "--seed", "1",
               "--subset-id", bad)
    assert _one_error(res).startswith("error: --subset-id: invalid subset id")
    storage = Path(get_settings().storage_url)
    assert not (storage / "escaped").exists() and not (storage / "subsets" / "a").exists()


def test_a_pool_that_is_not_published_is_one_error_line(tmp_path: Path) -> None:
    line = _one_error(_cli("pool", "rotate", "--pools", str(tmp_path), "--size", "1"))
    assert line == (f"error: {tmp_path}: no such pool version in the ledger (name a published "
                    "pool by its id: ID or ID@vN)")


def test_a_track_alias_refuses_another_tracks_pool_before_writing(folder_pool: str) -> None:
    """``medbench rotate`` (flows/medbench.py passes ``track="medbench"``) on a segmentation
    pool: refused naming the pool and its track; no subset is written or activated."""
    from flows.rotate import rotate_pool

    subset_id = f"mb-{uuid.uuid4().hex[:6]}"
    with pytest.raises(InputDataError, match=f"{folder_pool}: is a segmentation pool, not a "
                                             "medbench pool"):
        rotate_pool(pools=[folder_pool], size=1, seed=1, subset_id=subset_id,
                    track="medbench")
    assert store.pools(pool_id=subset_id) == []
    assert not (Path(get_settings().storage_url) / "subsets" / subset_id).exists()
