"""An example external agent for medflows (docs/agents.md): standard library + ``openai``.

It reads the task brief, asks its model once through the run's model proxy (the ``openai``
client finds the proxy in ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``), writes the reply as its
plan, and submits the public sample submission (already in the task's layout) unchanged. It
tells the proxy which stage it is in (S1 plan, S5 submit) for the run's per-stage telemetry.
"""

import os
import shutil
from pathlib import Path

import httpx
import openai


def enter(stage: str) -> None:
    """Say which stage (s1 … s5) the agent is in: the run's telemetry counts time and calls
    per stage."""
    httpx.post(os.environ["MEDFLOWS_STAGE_URL"], json={"stage": stage},
               headers={"Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}"},
               timeout=10).raise_for_status()


brief = Path(os.environ["MEDFLOWS_BRIEF"]).read_text(encoding="utf-8")
public = Path(os.environ["MEDFLOWS_PUBLIC"])
workspace = Path(os.environ["MEDFLOWS_WORKSPACE"])
submission = Path(os.environ["MEDFLOWS_SUBMISSION"])
print(f"brief: {len(brief)} characters; budget {os.environ['MEDFLOWS_BUDGET_S']} s")

enter("s1")
reply = openai.OpenAI().chat.completions.create(
    model=os.environ["MEDFLOWS_MODEL"], max_tokens=300,
    messages=[{"role": "system", "content": "You plan solutions to medical-imaging tasks."},
              {"role": "user", "content": f"{brief}\n\nIn three lines: what is the plan?"}])
plan = reply.choices[0].message.content or ""
print("model:", plan)
(workspace / "plan.md").write_text(f"# Plan\n\n{plan}\n", encoding="utf-8")

enter("s5")
sample = public / "sample_submission"
if submission.exists():
    shutil.rmtree(submission)
shutil.copytree(sample, submission)
print("submitted:", sorted(p.name for p in submission.iterdir()))
