"""An example external agent for medflows (docs/agents.md): standard library + ``openai``.

It reads the task brief, asks its model once through the run's model proxy (the ``openai``
client finds the proxy in ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``), writes the reply as its
plan, and submits the public sample submission (already in the task's layout) unchanged.
"""

import os
import shutil
from pathlib import Path

import openai

brief = Path(os.environ["MEDFLOWS_BRIEF"]).read_text(encoding="utf-8")
public = Path(os.environ["MEDFLOWS_PUBLIC"])
workspace = Path(os.environ["MEDFLOWS_WORKSPACE"])
submission = Path(os.environ["MEDFLOWS_SUBMISSION"])
print(f"brief: {len(brief)} characters; budget {os.environ['MEDFLOWS_BUDGET_S']} s")

reply = openai.OpenAI().chat.completions.create(
    model=os.environ["MEDFLOWS_MODEL"], max_tokens=300,
    messages=[{"role": "system", "content": "You plan solutions to medical-imaging tasks."},
              {"role": "user", "content": f"{brief}\n\nIn three lines: what is the plan?"}])
plan = reply.choices[0].message.content or ""
print("model:", plan)
(workspace / "plan.md").write_text(f"# Plan\n\n{plan}\n", encoding="utf-8")

sample = public / "sample_submission"
if submission.exists():
    shutil.rmtree(submission)
shutil.copytree(sample, submission)
print("submitted:", sorted(p.name for p in submission.iterdir()))
