"""One small published pool per registered kit, and stored runs on it, for the kit contract test
(tests/tasks_lib/test_kit_contract.py).

Each builder writes a pool the way its track's construct steps do, passes it through the publish
gate with a recorded override (:mod:`support.audited`) and ledgers it, so rotate, the score flow
and the leaderboard read it like any published pool. A new kit registers its builder in
:data:`POOL_BUILDERS` (the contract test fails for a kit without one); a test-only kit (the toy
track of ``tests/support/toy_track/``) is registered for the contract test's module alone, as a
kit outside the tree (``MEDFLOWS_KIT_MODULES``: :func:`with_test_kits`).
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from evaluators.core import Registry, RunStatus
from support.audited import record_override
from support.imaging_pools import build_pool
from tasks_lib.agents import upload_agent
from tasks_lib.audits.baselines import PERFECT, SAMPLE, Baseline
from tasks_lib.audits.null_agents import Scored
from tasks_lib.audits.pool import PoolInfo, pool_info
from tasks_lib.audits.scoring import score_folder
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import PoolRow
from tasks_lib.records import SUBMISSION, RunRecord, run_store
from tasks_lib.scoring import record_run
from tasks_lib.tracks.base import kit_for

PoolBuilder = Callable[[Path], str]
"""Writes a published, ledgered pool under a scratch folder; returns its root URL."""

POOL_BUILDERS: Registry[PoolBuilder] = Registry("kit contract pool builder")
"""Track name → the builder of its contract pool."""

IMAGING = {"segmentation": "brain-tissue-seg", "enhancement": "ldct-denoise",
           "detection": "brain-lesion-det", "vqa": "brain-lesion-vqa",
           "report_generation": "brain-lesion-report"}
"""The imaging tracks' contract tasks (the smallest shipped card of each)."""
MEDBENCH_TASKS = ["medqa-choice", "medqa-open", "dicom-string", "lesion-boxes"]


def _imaging(task_id: str) -> PoolBuilder:
    return lambda root: build_pool(task_id, root)[0]


@POOL_BUILDERS.register("qa")
def _qa(root: Path) -> str:
    from support.ops_support import publish_test_pool

    return publish_test_pool("kit-contract-qa", {"medqa": 24, "medbullets": 16}).url


@POOL_BUILDERS.register("challenge")
def _challenge(root: Path) -> str:
    from tasks_lib.challenge.pool import publish_challenge_pool
    from tasks_lib.pool_publish import record_version

    url, manifest = publish_challenge_pool("ldct-iqa", str(root / "ldct-iqa" / "v1"))
    record_override(url)
    record_version.fn(url, manifest, len(manifest.cases))
    return url


@POOL_BUILDERS.register("medbench")
def _medbench(root: Path) -> str:
    from tasks_lib.medbench.pool import build_task, publish
    from tasks_lib.pool_publish import record_version

    url, manifest = publish("kit-contract-mb", str(root / "mb" / "v1"),
                            {t: build_task(t) for t in MEDBENCH_TASKS}, seed=0)
    record_override(url, "medbench")
    record_version.fn(url, manifest, manifest.n_items)
    return url


@POOL_BUILDERS.register("rwe")
def _rwe(root: Path) -> str:
    """Two studies on the test process's study cluster (tests/tasks_lib/rwe/pool_support.py)."""
    from tests.tasks_lib.rwe.pool_support import small_pool

    url = small_pool(root / "rwe" / "v1", pool_id="kit-contract-rwe")
    record_override(url, "rwe")
    info = pool_info(url)
    store.record_pool(PoolRow(pool_id=info.pool_id, version=info.version, track="rwe",
                              content_hash=info.pool_hash, manifest_url=f"{url}/manifest.json",
                              n_items=len(kit_for("rwe").rotation.units(url))))
    return url


for _track, _task_id in {**IMAGING, "toy_slides": "toy-slides"}.items():
    POOL_BUILDERS.add(_track, _imaging(_task_id))


TEST_KITS = "support.toy_track"
"""The test-only kits, as ``MEDFLOWS_KIT_MODULES`` names them (a kit outside the tree)."""


@contextmanager
def with_test_kits() -> Iterator[list[str]]:
    """The shipped kits plus the test-only kits of ``tests/support``, registered through
    ``MEDFLOWS_KIT_MODULES`` (as every composition root registers a kit kept outside the tree,
    so the evaluator sandbox imports them too) until the block exits; then the setting and the
    registries are as before, so other modules see the shipped kits alone. Yields every
    registered kit's name."""
    from tasks_lib.imaging.registry import IMAGING_KITS, register
    from tasks_lib.settings import reset_settings
    from tasks_lib.tracks.base import KITS
    from tasks_lib.tracks.extra import register_extra_kits

    with pytest.MonkeyPatch.context() as mp:
        for registry in (KITS, IMAGING_KITS):
            mp.setattr(registry, "_entries", dict(registry._entries))
        mp.setenv("MEDFLOWS_KIT_MODULES", TEST_KITS)
        reset_settings()
        try:
            register_extra_kits()  # registers on the module's first import
            from support.toy_track.kit import KIT

            if KIT.track.value not in KITS:  # imported by an earlier block
                register(KIT)
            yield sorted(KITS.names())
        finally:
            mp.undo()
            reset_settings()


def store_run(info: PoolInfo, folder: Path, agent: str, **fields: object) -> str:
    """Store ``folder`` as the submission of a new run of ``agent`` on the pool (what execute
    leaves: ``runs/<run_id>/submission/`` and the run record, ledgered); on a pool run task by
    task (``kit.pool_task_ids``) the run is on its first task, with ``folder``'s sub-folder of
    that task (a baseline's layout there). ``fields`` set the record's other fields (status,
    cost, time, violations). Returns the run id."""
    run_id = f"kc-{info.track.value}-{uuid.uuid4().hex[:10]}"
    tasks = kit_for(info.track).pool_task_ids(info.url)
    task_id = info.task_id if tasks is None else tasks[0]
    source = folder if tasks is None else folder / task_id
    dest = run_store(run_id).child(SUBMISSION)
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        dest.write_bytes(path.relative_to(source).as_posix(), path.read_bytes())
    record = RunRecord.model_validate({
        "run_id": run_id, "agent": upload_agent(agent), "task_id": task_id,
        "track": info.track, "status": RunStatus.COMPLETED, "pool_url": info.url,
        "pool_id": info.pool_id, "pool_version": info.version, "pool_hash": info.pool_hash,
        **fields})
    record_run(record)
    return run_id


class KitPools:
    """Each kit's contract pool and its baselines, built on first use (once per test module:
    the builders cost seconds to minutes)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._urls: dict[str, str] = {}
        self._written: dict[str, list[Baseline]] = {}
        self._scored: dict[str, list[Scored]] = {}

    def url(self, track: str) -> str:
        """Root URL of the kit's published contract pool."""
        if track not in self._urls:
            self._urls[track] = POOL_BUILDERS.get(track)(self.root / "pools" / track)
        return self._urls[track]

    def info(self, track: str) -> PoolInfo:
        """Identity of the kit's contract pool."""
        return pool_info(self.url(track))

    def written(self, track: str) -> list[Baseline]:
        """The baseline submissions the kit writes for its pool (:meth:`TrackKit.baselines`)."""
        if track not in self._written:
            self._written[track] = kit_for(track).baselines(
                self.url(track), self.root / "baselines" / track)
        return self._written[track]

    def scored(self, track: str) -> list[Scored]:
        """The kit's baselines, each with its audit value under the kit's scorer (as the
        exploit audit's null-agent check scores them; call it inside a
        :func:`~tasks_lib.compute.shared_dask` block, as the audit does, so a kit scoring on
        Dask starts one cluster for them all)."""
        if track not in self._scored:
            kit, info = kit_for(track), self.info(track)
            self._scored[track] = [
                Scored(b, kit.audit_value(score_folder(info, b.folder, b.folder.name)))
                for b in self.written(track)]
        return self._scored[track]

    def perfect(self, track: str) -> Path:
        """The folder of the kit's perfect submission."""
        return next(b.folder for b in self.written(track) if b.name == PERFECT)

    def null(self, track: str) -> Path:
        """The folder of a null agent that submits something: the public sample where the
        pool has one, else the kit's last-written null agent (its constant answers). On a pool
        run task by task (``kit.pool_task_ids``) the null agent's files are laid over the
        perfect submission's, so a run on one task is valid and worse (an RWE session without
        its cohort file is refused whole; the null answers ride on the reference cohort)."""
        nulls = [b for b in self.written(track) if b.floor is not None]
        folder = next((b.folder for b in nulls if b.name == SAMPLE), nulls[-1].folder)
        if kit_for(track).pool_task_ids(self.url(track)) is None:
            return folder
        over = self.root / "null-over-perfect" / track
        if not over.is_dir():
            shutil.copytree(self.perfect(track), over)
            shutil.copytree(folder, over, dirs_exist_ok=True)
        return over
