"""AIDE (``aideml`` 0.2.2, Weco AI) as a medflows external agent (docs/agents.md).

This wrapper plays the part of MLE-bench's ``agents/aide/start.sh``: it hands AIDE the task and
collects its answer; the search is AIDE's own (its ``Agent``, ``Interpreter`` and ``Journal``,
unchanged), driven step by step as ``aide.Experiment.run`` does.

- Task: the brief (``$MEDFLOWS_BRIEF``) plus a note on where the submission goes is AIDE's task
  description; the public view is its ``data_dir`` (linked into its workspace's ``input/``).
- Model: ``$MEDFLOWS_PROVIDER_MODEL`` (e.g. ``openai/gpt-4o-mini``) for coding and feedback.
  AIDE sends a name it does not recognise as OpenAI's own to ``$OPENAI_BASE_URL`` with the chat
  API, i.e. to the run's model proxy, which answers to it; a bare ``gpt-…`` name would make AIDE
  call ``api.openai.com``'s Responses API directly, which the sandbox refuses.
- Steps: ``$MEDFLOWS_MAX_STEPS``; the loop also stops when the wall time left
  (``$MEDFLOWS_BUDGET_S``) is under one execution's cap, so the run ends by itself.
- Submission: AIDE's code writes ``./working/submission/`` (or, as AIDE's own prompt asks,
  ``./working/submission.csv``); the folder is emptied before each execution, and after each step
  whose node is AIDE's best so far (``journal.get_best_node()``) it is copied to
  ``$MEDFLOWS_SUBMISSION``. A run killed at its cap keeps the best submission found until then.
- Budget: AIDE retries a refused call with backoff and no cap (``backoff_create`` retries its
  ``OPENAI_TIMEOUT_EXCEPTIONS`` forever). Behind the run's proxy a 429 means the run's cost
  budget is spent (provider rate limits are retried behind the proxy), so the wrapper takes
  ``RateLimitError`` out of that tuple — the one AIDE setting it changes — and ends the search
  there, keeping the best submission so far (the run is then ``partial``), instead of waiting
  out the wall clock.
- Records: AIDE's journal, best solution and tree plot under ``$MEDFLOWS_WORKSPACE/aide/logs``;
  the best node's plan as ``plan.md`` (what the S1 judge reads).
- Stages (the run's per-stage telemetry, ``$MEDFLOWS_STAGE_URL``): S2 while AIDE's workspace is
  prepared, S1 for its drafting steps (a plan and a first script each, ``search.num_drafts``),
  S3 for its improve and debug steps (each judged by its validation metric), S5 at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path

START = time.monotonic()
BUDGET_S = float(os.environ["MEDFLOWS_BUDGET_S"])
MARGIN_S = 10.0
"""Wall time kept back for copying the submission and exiting."""

import openai  # noqa: E402  (after START: imports count against the budget)
from aide.agent import Agent  # noqa: E402
from aide.backend import backend_openai  # noqa: E402
from aide.interpreter import Interpreter  # noqa: E402
from aide.journal import Journal  # noqa: E402
from aide.utils.config import (  # noqa: E402
    _load_cfg,
    load_task_desc,
    prep_agent_workspace,
    prep_cfg,
    save_run,
)

backend_openai.OPENAI_TIMEOUT_EXCEPTIONS = tuple(
    e for e in backend_openai.OPENAI_TIMEOUT_EXCEPTIONS if e is not openai.RateLimitError)

WORKSPACE = Path(os.environ["MEDFLOWS_WORKSPACE"])
SUBMISSION = Path(os.environ["MEDFLOWS_SUBMISSION"])
NOTE = """

## Where AIDE's code writes the submission

The input files are in `./input/`. Write the submission into the folder `./working/submission/`,
in exactly the layout the brief above gives for the submission folder (same file names and
formats as `./input/sample_submission/` where there is one). It is the file set that is graded.
"""


def configure() -> object:
    """AIDE's config: its defaults (``aide/utils/config.yaml``) with the run's task, model,
    steps, execution cap and folders."""
    root = WORKSPACE / "aide"
    root.mkdir(parents=True, exist_ok=True)
    desc = root / "task.md"
    desc.write_text(Path(os.environ["MEDFLOWS_BRIEF"]).read_text(encoding="utf-8") + NOTE,
                    encoding="utf-8")
    model = os.environ["MEDFLOWS_PROVIDER_MODEL"]
    cfg = _load_cfg(use_cli_args=False)
    cfg.data_dir = os.environ["MEDFLOWS_PUBLIC"]
    cfg.desc_file = str(desc)
    cfg.log_dir = str(root / "logs")
    cfg.workspace_dir = str(root / "workspaces")
    cfg.exp_name = os.environ.get("MEDFLOWS_RUN_ID", "run").replace("/", "-")
    cfg.copy_data = False  # the public view is read-only already: link, do not copy
    cfg.generate_report = False
    cfg.exec.timeout = int(os.environ["MEDFLOWS_EXEC_TIMEOUT_S"])
    cfg.agent.steps = int(os.environ["MEDFLOWS_MAX_STEPS"])
    cfg.agent.code.model = cfg.agent.feedback.model = cfg.report.model = model
    return prep_cfg(cfg)


def produced(working: Path) -> Path | None:
    """What the last execution left as its submission: the folder, else AIDE's own
    ``submission.csv`` (as a one-file folder), else nothing."""
    folder = working / "submission"
    if folder.is_dir() and any(folder.iterdir()):
        return folder
    single = working / "submission.csv"
    if single.is_file():
        folder.mkdir(exist_ok=True)
        shutil.copy2(single, folder / single.name)
        return folder
    return None


def enter(stage: str) -> None:
    """Tell the run's proxy which stage AIDE is in (telemetry only: a failure is printed)."""
    request = urllib.request.Request(
        os.environ["MEDFLOWS_STAGE_URL"], data=json.dumps({"stage": stage}).encode(),
        headers={"Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}",
                 "Content-Type": "application/json"}, method="POST")
    try:
        urllib.request.urlopen(request, timeout=10).close()
    except (urllib.error.URLError, OSError) as exc:
        print(f"could not declare stage {stage}: {exc}", flush=True)


def keep(folder: Path) -> None:
    """Make ``folder`` the run's submission."""
    staging = SUBMISSION.with_name(SUBMISSION.name + ".next")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(folder, staging)
    shutil.rmtree(SUBMISSION, ignore_errors=True)
    staging.rename(SUBMISSION)


def main() -> None:
    enter("s2")
    cfg = configure()
    task_desc = load_task_desc(cfg)
    prep_agent_workspace(cfg)
    journal = Journal()
    agent = Agent(task_desc=task_desc, cfg=cfg, journal=journal)
    interpreter = Interpreter(cfg.workspace_dir, **dict(cfg.exec))
    working = Path(cfg.workspace_dir) / "working"

    def execute(code: str, reset: bool = True) -> object:
        shutil.rmtree(working / "submission", ignore_errors=True)
        (working / "submission.csv").unlink(missing_ok=True)
        return interpreter.run(code, reset)

    kept = None
    try:
        for step in range(cfg.agent.steps):
            left = BUDGET_S - (time.monotonic() - START)
            if left < cfg.exec.timeout + MARGIN_S and step > 0:
                print(f"stopping before step {step + 1}: {left:.0f} s left")
                break
            enter("s1" if len(journal.draft_nodes) < cfg.agent.search.num_drafts else "s3")
            try:
                agent.step(exec_callback=execute)
            except openai.RateLimitError as exc:
                print(f"stopping at step {step + 1}: the model proxy refused a call "
                      f"({exc.code}: the run's cost budget is spent)", flush=True)
                break
            save_run(cfg, journal)
            node, best = journal.nodes[-1], journal.get_best_node()
            found = produced(working)
            metric = None if node.is_buggy else node.metric.value
            print(f"step {step + 1}: node {node.id[:8]} buggy={node.is_buggy} metric={metric} "
                  f"submission={'yes' if found else 'no'}", flush=True)
            if best is node and found is not None:
                keep(found)
                kept = node
                (WORKSPACE / "plan.md").write_text(f"# Plan (AIDE's best node)\n\n{node.plan}\n",
                                                   encoding="utf-8")
    finally:
        interpreter.cleanup_session()
    enter("s5")
    if kept is None:
        print("no step produced a valid submission")
    else:
        print(f"submitted node {kept.id[:8]} (metric {kept.metric.value})")


if __name__ == "__main__":
    main()
