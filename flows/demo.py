"""``medflows demo``: each of the five protocols once, on small embedded data, through the flows
its own CLI commands call, on the default storage root and ledger.

* **qa** (MedAgentsBench): build a hard-question pool, replay every recorded (model, method) of
  ``predictions/hard.csv.gz`` on it, score, leaderboard (``--protocol qa`` alone: today's full
  862-question demo);
* **imaging** (AutoMedBench): build the low-dose CT denoising pool, write the classical baseline
  submission (total-variation denoising), score it in upload mode;
* **challenge** (ReX-MLE): build a challenge's pool from its synthetic case, run the scripted
  baseline cell in the sandbox, grade it and place it on the challenge's human leaderboard;
* **medbench** (MedBench v4): build a small item bank, download a randomized split as a
  submitter, write a scripted answer sheet, upload it, score it server-side;
* **rwe** (RWE-bench): build the study database at the smallest size that works and run the
  honest and the fabricating scripted analysts in the sandbox.

A pool an earlier demo built is reused while it is usable and fits (``rebuild`` builds anew).
Judges are the offline ``rules`` judge unless ``MEDFLOWS_JUDGE_MODEL`` names one. The RWE
cluster the demo starts is stopped when the command ends unless ``--keep-services``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from flows import compose
from tasks_lib.demo import (
    DemoRow,
    Echo,
    Progress,
    board,
    database_ready,
    demo_folder,
    download_and_upload,
    n_items,
    offline_judge,
    reusable_pool,
    upload_again,
)
from tasks_lib.rwe.construct_steps import MIN_PATIENTS

compose()  # every kit registered, also when a deployment loads this module

PROTOCOLS = ("qa", "imaging", "challenge", "medbench", "rwe")
"""The protocols, in the order the demo runs them."""

QA_POOL, QA_DATASETS, QA_PER_DATASET = "medagentsbench-hard-demo", ["medqa", "medbullets",
                                                                   "mmlu"], 20
"""The all-protocol demo's QA pool: the first hard questions of three datasets."""
IMAGING_TASK = "ldct-denoise"
CHALLENGE, CHALLENGE_AGENT = "ldct-iqa", "scripted-baseline"
MEDBENCH_POOL = "medbench-demo"
MEDBENCH_TASKS = ["medqa-choice", "pubmedqa-choice", "report-labels", "dicom-fields",
                  "lesion-boxes", "safety-open"]
"""Every answer type once (single choice twice: MedQA and PubMedQA's yes/no/maybe)."""
RWE_POOL, RWE_STUDY, RWE_SEED = "rwe-demo", "statin-sepsis", 0
RWE_PATIENTS = MIN_PATIENTS
"""The smallest EHR every study's planted effects and traps hold on (the RWE tests' size)."""


def _elapsed(started: float) -> float:
    return round(time.monotonic() - started, 1)


def _pool(progress: Progress, pool_id: str, fits: Callable[[dict[str, Any]], bool],
          rebuild: bool, build: Callable[[], tuple[str, str]],
          describe: Callable[[str], str] = lambda url: "") -> str:
    """The "pool" step of every protocol: the newest version of ``pool_id`` while it is usable
    and ``fits`` (unless ``rebuild``), else ``build()`` (its URL and what to add to "built
    URL"); ``describe(url)`` ends the line either way. The pool's URL."""
    with progress.step("pool") as step:
        url = None if rebuild else reusable_pool(pool_id, fits)
        if url is not None:
            step.detail = f"reused {url}{describe(url)}"
            return url
        url, built = build()
        step.detail = f"built {url}{built}{describe(url)}"
        return url


def _skipped(protocol: str, what: str, reason: str, started: float) -> DemoRow:
    return DemoRow(protocol=protocol, what=what, headline=f"skipped: {reason}",
                   seconds=_elapsed(started), report=None)


def qa(progress: Progress, per_dataset: int = QA_PER_DATASET,
       datasets: list[str] | None = QA_DATASETS, pool_id: str = QA_POOL,
       rebuild: bool = False) -> DemoRow:
    """Build (or reuse) a hard QA pool of ``datasets`` (None: all nine, the published set),
    replay every recorded agent on it, score and report."""
    from flows.construct import construct_qa
    from flows.execute import execute_qa
    from flows.pipeline import HARD_MODELS
    from flows.report import report
    from flows.score import score_runs
    from tasks_lib.qa.ingest import default_source
    from tasks_lib.storage import Storage

    started, source = time.monotonic(), default_source()
    asked = sorted(datasets) if datasets else None  # None: the kit's every card

    def fits(m: dict[str, Any]) -> bool:
        chosen = m.get("selection", {})
        return ("tasks" in chosen and chosen["tasks"] == asked
                and chosen.get("per_dataset") == per_dataset
                and chosen.get("models") == HARD_MODELS)

    url = _pool(progress, pool_id, fits, rebuild,
                lambda: (construct_qa(pool_id=pool_id, datasets=asked, source=source,
                                      models=HARD_MODELS, per_dataset=per_dataset, meld=False,
                                      auto_approve=True).url, ""),
                lambda url: f" ({n_items(url)} hard questions)")
    n_questions, cards = n_items(url), Storage(url).read_json("manifest.json")["cards"]
    with progress.step("execute (replay)") as step:
        runs = execute_qa(pool=url, replay=f"{source}/predictions/hard.csv.gz")
        step.detail = f"{len(runs)} recorded (model, method) agents replayed"
    with progress.step("score") as step:
        step.detail = f"{len(score_runs(pool=url))} runs scored"
    with progress.step("report") as step:
        files = report(pool=url)
        step.detail = files.markdown
    rows = [r for r in board(pool_url=url) if r.rank is not None]
    best = min(rows, key=lambda r: r.rank or 0)
    return DemoRow(protocol="qa", seconds=_elapsed(started), report=files.markdown, pool=url,
                   what=f"replay of {len(rows)} recorded agents on {n_questions} hard questions "
                        f"of {', '.join(cards) if len(cards) < 4 else f'{len(cards)} datasets'}",
                   headline=f"best {best.agent_id}: {best.primary_metric} "
                            f"{best.task_score:.3f} (macro over datasets)",
                   scores={"best": best.task_score, "agents": float(len(rows))})


def imaging(progress: Progress, rebuild: bool = False) -> DemoRow:
    """Build (or reuse) the low-dose CT denoising pool, write the classical baseline
    (total-variation denoising) as a user's submission folder, score it in upload mode,
    report."""
    from flows.construct import construct_imaging
    from flows.report import report
    from flows.score import score_submission
    from tasks_lib.imaging.baselines import BaselineKind, write_baseline

    started = time.monotonic()
    url = _pool(progress, IMAGING_TASK, lambda m: True, rebuild,
                lambda: (construct_imaging(IMAGING_TASK).removesuffix("/manifest.json"), ""))
    folder = demo_folder() / "imaging" / f"{IMAGING_TASK}-classical"
    with progress.step("baseline submission") as step:
        files = write_baseline(BaselineKind.CLASSICAL, url, folder)
        step.detail = f"{len(files)} files in {folder}"
    with progress.step("score (upload mode)") as step:
        card = score_submission(IMAGING_TASK, str(folder), url)
        step.detail = f"run {card.run_id} {card.primary_metric}={card.task_score:.4f}"
    with progress.step("report") as step:
        files_url = report(pool=url).markdown
        step.detail = files_url
    shown = ", ".join(f"{k} {v:.3f}" for k, v in card.metrics.items() if v is not None)
    return DemoRow(protocol="imaging", seconds=_elapsed(started), report=files_url, pool=url,
                   what=f"classical baseline submission on {IMAGING_TASK} "
                        f"({len(card.per_case)} low-dose CT slices)",
                   headline=shown, scores=dict(card.metrics))


def challenge(progress: Progress, rebuild: bool = False) -> DemoRow:
    """Build (or reuse) a challenge's pool from its synthetic case, run the scripted baseline
    cell in the sandbox (it checks the local metric, then submits), grade and place it."""
    from flows.challenge import construct_challenge
    from flows.execute import run_cell
    from flows.report import report
    from tasks_lib.records import read_card
    from tasks_lib.sandbox.local import SandboxUnavailableError
    from tasks_lib.sweep import sweep_orphans

    started, what = time.monotonic(), f"{CHALLENGE_AGENT} cell on {CHALLENGE} (synthetic case)"
    url = _pool(progress, CHALLENGE, lambda m: True, rebuild,
                lambda: (construct_challenge(CHALLENGE).removesuffix("/manifest.json"), ""))
    with progress.step("cell (sandbox)") as step:
        sweep_orphans()
        try:
            cell = run_cell(agent_id=CHALLENGE_AGENT, task_id=CHALLENGE, tier="lite")
        except SandboxUnavailableError as exc:
            step.detail = f"skipped: {exc}"
            return _skipped("challenge", what, f"no sandbox ({exc})", started)
        step.detail = f"run {cell.run_id} {cell.status.value}, overall {cell.overall}"
    card = read_card(cell.run_id, cell.evaluator_version or "")
    placed = card.groups.get("leaderboard", {})
    with progress.step("report") as step:
        files_url = report(task_id=CHALLENGE).markdown
        step.detail = files_url
    n, rank = int(placed.get("n_competitors", 0)), placed.get("mean_rank")
    return DemoRow(protocol="challenge", seconds=_elapsed(started), report=files_url, pool=url,
                   what=what,
                   headline=f"percentile {placed.get('percentile', 0):.2f}: placed "
                            f"{'-' if rank is None else f'{rank:g}'} of {n + 1} beside the "
                            f"{n} human entries (illustrative)",
                   scores={"percentile": placed.get("percentile"),
                           "mean_rank": placed.get("mean_rank"), "overall": cell.overall})


def medbench(progress: Progress, rebuild: bool = False) -> DemoRow:
    """Build (or reuse) a small item bank; as a submitter, download a randomized split, write
    a scripted answer sheet and upload it (the same sheet again on a re-run: the same version,
    never charged twice); the server maps it back, scores it and reports."""
    from flows.medbench import construct_medbench
    from flows.report import report
    from tasks_lib.medbench.items import read_manifest

    started = time.monotonic()
    url = _pool(progress, MEDBENCH_POOL,
                lambda m: sorted(m.get("tasks", {})) == sorted(MEDBENCH_TASKS), rebuild,
                lambda: (construct_medbench(MEDBENCH_POOL, MEDBENCH_TASKS), ""))
    manifest = read_manifest(url)
    folder = demo_folder() / "medbench"
    with progress.step("download split, upload answers") as step:
        row = upload_again(folder, manifest.content_hash)
        step.detail = f"the same answer sheet again: {folder / 'answers.jsonl'}"
        if row is None:
            row, step.detail = download_and_upload(url, folder)
    with progress.step("score (server side)") as step:
        card = _upload_card(row.run_id)
        step.detail = f"run {row.run_id} version {row.version} overall={card.task_score:.1f}"
    with progress.step("report") as step:
        files_url = report(pool=url).markdown
        step.detail = files_url
    dims = {k.removeprefix("dimension/"): v for k, v in card.metrics.items()
            if k.startswith("dimension/") and v is not None}
    return DemoRow(protocol="medbench", seconds=_elapsed(started), report=files_url, pool=url,
                   what=f"upload of a scripted answer sheet (longest option, no model) on "
                        f"{manifest.n_items} items of {len(MEDBENCH_TASKS)} tasks",
                   headline=f"overall {card.task_score:.1f}/100 ("
                            + ", ".join(f"{k} {v:.1f}" for k, v in sorted(dims.items())) + ")",
                   scores={"overall": card.task_score, **dims})


def _upload_card(run_id: str) -> Any:
    """The upload's score card: the stored one, else scored now (as ``medbench upload``)."""
    from flows.score import score_run
    from tasks_lib.ledger import store
    from tasks_lib.records import read_card

    scores = store.scores_for([run_id])
    return read_card(run_id, scores[-1].evaluator_version) if scores else score_run(run_id)


def rwe(progress: Progress, rebuild: bool = False) -> DemoRow:
    """Build (or reuse) the study pool on the study database, run the honest and the
    fabricating scripted analysts in the sandbox, report. The RWE cluster it starts is a
    service of the command (``tasks_lib.service_scope``): stopped when the command ends unless
    ``--keep-services``."""
    from tasks_lib.rwe.cluster import ClusterError
    from tasks_lib.sandbox.local import SandboxUnavailableError

    started = time.monotonic()
    what = f"rwe-honest and rwe-fabricate on {RWE_STUDY} ({RWE_PATIENTS:,} patients)"
    try:
        return _rwe_runs(progress, rebuild, what, started)
    except (SandboxUnavailableError, ClusterError) as exc:
        return _skipped("rwe", what, str(exc), started)


def _rwe_runs(progress: Progress, rebuild: bool, what: str, started: float) -> DemoRow:
    from flows.execute import run_cell
    from flows.report import report
    from flows.rwe import construct_rwe
    from tasks_lib.records import read_card
    from tasks_lib.sweep import sweep_orphans

    def fits(m: dict[str, Any]) -> bool:
        return (m.get("n_patients"), m.get("seed"), m.get("studies")) == (
            RWE_PATIENTS, RWE_SEED, [RWE_STUDY]) and database_ready(m)

    def build() -> tuple[str, str]:
        built = construct_rwe(seed=RWE_SEED, n_patients=RWE_PATIENTS, studies=[RWE_STUDY],
                              pool_id=RWE_POOL)
        return built.url, (f" (database {built.manifest.database}"
                           f"{', reused' if built.database_reused else ''})")

    url = _pool(progress, RWE_POOL, fits, rebuild, build)
    sweep_orphans()
    cells = {}
    for agent in ("rwe-honest", "rwe-fabricate"):
        with progress.step(f"cell {agent} (sandbox)") as step:
            cells[agent] = run_cell(agent_id=agent, task_id=RWE_STUDY, tier="lite")
            step.detail = (f"run {cells[agent].run_id} {cells[agent].status.value}, "
                           f"SR {cells[agent].metrics.get('rwe_sr')}")
    with progress.step("report") as step:
        files_url = report(task_id=RWE_STUDY).markdown
        step.detail = files_url
    honest, fake = cells["rwe-honest"], cells["rwe-fabricate"]
    fake_card = read_card(fake.run_id, fake.evaluator_version or "")
    return DemoRow(protocol="rwe", seconds=_elapsed(started), report=files_url, pool=url,
                   what=what,
                   headline=f"honest SR {honest.metrics.get('rwe_sr'):.2f}; fabricating: "
                            f"{fake_card.invalid_reason or 'not caught'}, not ranked",
                   scores={"honest_sr": honest.metrics.get("rwe_sr"),
                           "fabricate_sr_screened": fake.metrics.get("rwe_sr_screened"),
                           "fabricate_cohort_valid": fake.metrics.get("cohort_valid")})


RUNNERS = {"imaging": imaging, "challenge": challenge, "medbench": medbench, "rwe": rwe}
"""The protocols whose demo takes only ``rebuild``."""


def run_demo(protocols: list[str], echo: Echo, per_dataset: int | None = None,
             rebuild: bool = False) -> list[DemoRow]:
    """Run ``protocols`` in the demo's order, one summary row each. ``qa`` alone is the full
    MedAgentsBench demo (all nine datasets, ``per_dataset`` hard questions each, default 100);
    with other protocols it is the small pool (``per_dataset`` default 20)."""
    started = time.monotonic()
    rows: list[DemoRow] = []
    with offline_judge():
        for name in [p for p in PROTOCOLS if p in protocols]:
            progress = Progress(name, echo, started)
            if name == "qa" and protocols == ["qa"]:
                rows.append(qa(progress, per_dataset or 100, None, "medagentsbench-hard",
                               rebuild))
            elif name == "qa":
                rows.append(qa(progress, per_dataset or QA_PER_DATASET, rebuild=rebuild))
            else:
                rows.append(RUNNERS[name](progress, rebuild))
    return rows

