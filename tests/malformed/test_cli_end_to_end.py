"""Representative malformed submissions end to end through ``medflows score submission``: exit
0, strict JSON, the case invalid with its reason, the card and score row stored, nothing written
outside the run's folder; user mistakes end with one ``error:`` line and exit 2."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.imaging_pools import build_pool
from support.malformed_submissions import (
    DET,
    LDCT,
    extra,
    npy_header,
    raw_box_doc,
    write,
)
from typer.testing import CliRunner

from flows.cli import imaging as _imaging  # noqa: F401  (registers the commands)
from flows.cli import runs as _runs  # noqa: F401
from flows.cli.groups import app
from tasks_lib.imaging.baselines import BaselineKind, baseline_files, write_submission
from tasks_lib.imaging.types import PoolManifest
from tasks_lib.ledger import store
from tasks_lib.storage import Storage


def _strict(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"non-strict JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")} if root.exists() else set()


@pytest.fixture(scope="module")
def pools(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, PoolManifest]]:
    root = tmp_path_factory.mktemp("cli-malformed")
    return {t: build_pool(t, root) for t in (LDCT, DET)}


Apply = Callable[[Path, PoolManifest], None]
CASES: list[tuple[str, str, Apply, str, int | None]] = [
    ("npy-header-728TiB", LDCT, write(npy_header((2 ** 22, 2 ** 22, 2 ** 19))), "array_size", 0),
    ("det-5000-digit-score", DET, write(raw_box_doc(scores="[" + "7" * 5000 + "]")),
     "json_number", 0),
    ("det-100000-deep", DET, write(b"[" * 100_000 + b"]" * 100_000), "json_depth", 0),
    ("det-non-utf8-extra-name", DET, extra("non_utf8_name"), "files_safe", None),
]


@pytest.mark.parametrize(("name", "task", "apply", "rule", "target"), CASES,
                         ids=[c[0] for c in CASES])
def test_score_submission_cli(prefect_harness: None, pools: dict[str, tuple[str, PoolManifest]],
                              tmp_path: Path, name: str, task: str, apply: Apply, rule: str,
                              target: int | None) -> None:
    url, m = pools[task]
    sub = write_submission(baseline_files(BaselineKind.PERFECT, url, m), tmp_path / name)
    apply(sub, m)
    storage = Path(Storage.from_settings().root_path)
    before = _tree(storage)
    done = CliRunner().invoke(app, ["score", "submission", "--task", task, "--submission",
                                    str(sub), "--pool", url, "--json"])
    assert done.exit_code == 0, (done.stdout, done.stderr)
    card = _strict(done.stdout)
    run_id = card["run_id"]
    # the pool-lock digest cache may gain an entry (a file written < 1 s before publish is
    # hashed on first use); nothing else outside the run's folder may appear
    new = {p for p in _tree(storage) - before if p not in ("cache", "cache/pool-locks")
           and not p.startswith("cache/pool-locks/")}
    assert new and all(p == "runs" or p.startswith(f"runs/{run_id}") for p in new), new
    stored = _strict((storage / "runs" / run_id / "scores" / f"{card['evaluator_version']}.json"
                      ).read_text())
    assert stored["task_score"] == card["task_score"]
    assert [s.run_id for s in store.scores_for([run_id])] == [run_id]
    per = {c["case_id"]: c for c in card["per_case"]}
    if target is None:
        assert all(c["valid"] for c in per.values())
        assert rule in {f["rule"] for f in card["validation"]["failures"]}
    else:
        bad = per.pop(m.cases[target].case_id)
        assert not bad["valid"] and rule in bad["reason"] and m.cases[target].output in bad[
            "reason"]
        assert all(c["valid"] for c in per.values())


def test_pool_of_another_task_is_refused_by_name(prefect_harness: None, pools: dict[
        str, tuple[str, PoolManifest]], tmp_path: Path) -> None:
    url, m = pools[LDCT]
    sub = write_submission(baseline_files(BaselineKind.PERFECT, url, m), tmp_path / "sub")
    done = CliRunner().invoke(app, ["score", "submission", "--task", DET, "--submission",
                                    str(sub), "--pool", url, "--json"])
    assert done.exit_code == 2 and done.stdout == ""
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1
    assert f"pool of task '{LDCT}'" in done.stderr and DET in done.stderr


def test_symlinked_submission_folder_is_refused(prefect_harness: None, pools: dict[
        str, tuple[str, PoolManifest]], tmp_path: Path) -> None:
    url, m = pools[DET]
    real = write_submission(baseline_files(BaselineKind.PERFECT, url, m), tmp_path / "real")
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    done = CliRunner().invoke(app, ["score", "submission", "--task", DET, "--submission",
                                    str(link), "--pool", url])
    assert done.exit_code == 2 and "symlink" in done.stderr and "refused" in done.stderr
    assert done.stderr.count("\n") == 1


def test_unknown_run_id_is_one_error_line(prefect_harness: None) -> None:
    done = CliRunner().invoke(app, ["score", "run", "no-such-run", "--json"])
    assert done.exit_code == 2 and done.stdout == ""
    assert done.stderr == "error: run id: no run 'no-such-run' in the ledger (see: medflows " \
                          "runs list)\n"


def test_cli_json_is_strict_and_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.cli.output import json_text

    monkeypatch.setenv("SOME_PROVIDER_API_KEY", "live-0123456789abcdef")
    text = json_text({"nan": float("nan"), "inf": [float("-inf"), 1.5],
                      "msg": "key live-0123456789abcdef echoed", "live-0123456789abcdef": 1})
    assert _strict(text) == {"nan": None, "inf": [None, 1.5], "msg": "key [REDACTED] echoed",
                             "[REDACTED]": 1}


def test_a_pool_of_another_track_is_refused_by_name(tmp_path: Path) -> None:
    from tasks_lib.errors import InputDataError
    from tasks_lib.imaging.pool import read_manifest

    (tmp_path / "manifest.json").write_text(json.dumps({"pool_id": "hard", "track": "qa",
                                                        "version": 1}))
    with pytest.raises(InputDataError, match="not an imaging pool: its manifest names 'hard' "
                                             "of track 'qa'"):
        read_manifest(str(tmp_path))
