"""Papercut (issue #26): ``medflows pool build rwe --n-patients 1000`` (the CLI's minimum)
failed because studies no longer discriminate. Measured (docs/rwe.md): below 8,000 patients
some planted effects are not significant on most seeds, and at any size a trap can miss by
chance. The build now refuses fewer than :data:`MIN_PATIENTS` before generating anything, and
re-seeds (bounded, recorded) when a trap flips nothing (spec §9.3 item 4).

The re-seed cases run at 1,000 patients (below the minimum, through :func:`build_ehr`), where
the generator's outcome per seed is known: ``statin-sepsis-cc``'s crude trap flips nothing on
seed 0 and flips on seed 1,000,000; ``glucose-ich`` (about 50 ICH stays) never discriminates.
"""

from __future__ import annotations

import json
from pathlib import Path

import psycopg2
import pytest
from typer.testing import CliRunner

from evaluators.core import InputDataError
from tasks_lib.rwe import load
from tasks_lib.rwe.construct_steps import (
    MIN_PATIENTS,
    RESEED_ATTEMPTS,
    RESEED_STRIDE,
    build_ehr,
    build_pool,
    resolve_database,
)
from tasks_lib.rwe.pool_files import load_study_pool
from tasks_lib.rwe.studies import load_studies
from tasks_lib.storage import Storage
from tests.tasks_lib.rwe.ehr_db import loaded_db


def _databases() -> set[str]:
    conn = psycopg2.connect(**load.dsn(resolve_database(None)))
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT datname FROM pg_database WHERE datname LIKE 'rwe_%'")
            return {r[0] for r in cur.fetchall()}
    finally:
        conn.close()


def test_fewer_patients_than_the_minimum_is_one_error_before_generating() -> None:
    from tasks_lib.tracks.base import BuildRequest

    with pytest.raises(InputDataError, match=r"n_patients: 1000: build with at least 8,000 "
                                             r"patients") as caught:
        build_pool(BuildRequest(tasks=[], options={"n_patients": 1000}))
    assert caught.value.source == "n_patients"


def test_the_cli_minimum_is_the_kits() -> None:
    """``--n-patients`` offers no size the build refuses (flows/cli/rwe.py: ``min=``)."""
    import typer.main

    import flows.cli.rwe  # noqa: F401  (registers pool build rwe)
    from flows.cli.groups import app

    root = typer.main.get_command(app)
    command = root.commands["pool"].commands["build"].commands["rwe"]  # type: ignore[attr-defined]
    [option] = [p for p in command.params if p.name == "n_patients"]
    assert option.min == MIN_PATIENTS  # type: ignore[attr-defined]


@pytest.mark.usefixtures("prefect_harness")
def test_every_study_builds_at_the_minimum(tmp_path: Path) -> None:
    """``pool build rwe`` at the minimum, every study, seed 0: published without re-seeding
    (the EHR database is the shared test one: same seed and size)."""
    import flows.cli.rwe  # noqa: F401  (registers pool build rwe)
    from flows.cli.groups import app

    shared = loaded_db(0, MIN_PATIENTS)
    out = tmp_path / "pool"
    res = CliRunner().invoke(app, ["pool", "build", "rwe", "--n-patients", str(MIN_PATIENTS),
                                   "--seed", "0", "--pool-id", "rwe-min-size", "--out",
                                   str(out), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert (summary["n_patients"], summary["seed"]) == (MIN_PATIENTS, 0)
    assert summary["ehr_hash"] == shared.loaded.content_hash
    pool = load_study_pool(Storage(str(out)))
    assert sorted(pool.answers) == [s.study_id for s in load_studies()]
    assert pool.manifest.requested_seed is None and pool.manifest.rejected_seeds == []
    traps = [json.loads(x) for x in (out / "audit" / "traps.jsonl").read_text().splitlines()]
    assert traps and all(t["flipped"] for t in traps)


@pytest.mark.usefixtures("prefect_harness")
def test_a_seed_whose_trap_flips_nothing_is_replaced_and_recorded() -> None:
    loaded_db()  # the process's study cluster
    before = _databases()
    ehr, spent = build_ehr(0, 1000, load_studies(["statin-sepsis-cc"]))
    assert ehr.seed == RESEED_STRIDE
    assert [(r.seed, r.problems) for r in ehr.rejected] == [
        (0, ["statin-sepsis-cc: trap crude flips nothing"])]
    assert all(t.flipped for b in ehr.builds for t in b.traps)
    assert min(spent) > 0
    after = _databases()
    assert ehr.loaded.database in after and len(after - before) <= 1  # seed 0's was dropped


@pytest.mark.usefixtures("prefect_harness")
def test_a_study_that_never_discriminates_fails_naming_every_seed() -> None:
    loaded_db()
    before = _databases()
    with pytest.raises(InputDataError, match="trap panel") as caught:
        build_ehr(0, 1000, load_studies(["glucose-ich"]))
    seeds = [k * RESEED_STRIDE for k in range(RESEED_ATTEMPTS)]
    message = str(caught.value)
    assert f"{RESEED_ATTEMPTS} seeds tried with 1000 patients" in message
    assert all(f"seed {s}: glucose-ich: trap traumatic_included flips nothing" in message
               for s in seeds)
    assert _databases() <= before  # nothing left on the study server
