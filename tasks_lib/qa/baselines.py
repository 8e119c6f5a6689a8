"""The QA kit's baseline submissions (``answers.jsonl``): no submission, one constant letter per
option letter the pool uses, and the perfect answers (the references).

A constant letter's floor is the chance rate plus a tolerance (``datasets/audit/floors.yaml``,
``qa.constant``): like the kit's task score, chance is a macro mean over datasets of
mean(1/n_options), and the tolerance is ``z`` binomial standard errors of that macro mean plus
``abs``. Between chance + tolerance and chance + ``block_factor`` tolerances the audit warns
(answer-position bias: a skewed label prior such as PubMedQA's yes/no/maybe is a property of the
data); beyond it the pool is blocked (a leak).
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

from tasks_lib.audits.baselines import Baseline, floor_table, no_submission, perfect, written
from tasks_lib.qa.audit import qa_rows
from tasks_lib.storage import Storage

BIAS = "answer-position bias: always answering this letter beats chance"
"""Source tag of a constant-letter floor (a warning below the blocking bound)."""


class Chance(NamedTuple):
    """The option letters a pool uses and what a constant letter scores by chance."""

    letters: list[str]
    chance: float
    se: float
    """Binomial standard error of the macro mean around ``chance``."""
    items: int


def chance_of(root: Storage) -> Chance:
    """Letters, chance rate, its standard error and item count of the pool at ``root``."""
    items = [it for it in qa_rows(root, "public_items") if isinstance(it.get("options"), dict)]
    letters = sorted({str(k) for it in items for k in it["options"]})
    by_ds: dict[str, list[float]] = {}
    for it in items:
        by_ds.setdefault(str(it.get("dataset")), []).append(1 / max(len(it["options"]), 1))
    if not by_ds:
        return Chance(letters, 0.0, 0.0, 0)
    rates = {ds: sum(v) / len(v) for ds, v in by_ds.items()}
    chance = sum(rates.values()) / len(rates)
    var = sum(p * (1 - p) / len(by_ds[ds]) for ds, p in rates.items()) / len(rates) ** 2
    return Chance(letters, chance, var ** 0.5, len(items))


def write_answers(root: Storage, folder: Path, answer: dict[str, str] | str) -> None:
    """A QA submission in ``folder``: ``answer`` (one letter, or ``dataset/realidx`` → letter)
    to every public item."""
    rows: list[dict[str, Any]] = []
    for it in qa_rows(root, "public_items"):
        key = f"{it.get('dataset')}/{it.get('realidx')}"
        letter = answer if isinstance(answer, str) else answer.get(key, "")
        rows.append({"dataset": it.get("dataset"), "realidx": it.get("realidx"),
                     "answer": letter, "raw": letter, "calls": 0, "prompt_tokens": None,
                     "completion_tokens": None, "time_s": None, "cost_usd": None})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows),
                                          encoding="utf-8")


def qa_baselines(pool_url: str, out: Path) -> list[Baseline]:
    """No submission, one constant letter per option letter, and the perfect answers."""
    root = Storage(pool_url)
    spec = floor_table("qa")["constant"]
    tolerance: Any = spec["tolerance"]
    block = float(str(spec.get("block_factor", 3.0)))
    odds = chance_of(root)
    tol = float(tolerance["abs"]) + float(tolerance["z"]) * odds.se
    source = (f"chance {odds.chance:.3f} + {tol:.3f} ({tolerance['z']} binomial SE of the macro "
              f"mean over {odds.items} items + {tolerance['abs']}; {block:g} tolerances block): "
              f"{BIAS}")
    found = [no_submission("qa", out)]
    for letter in odds.letters:
        folder = written(out, f"constant-{letter}", partial(write_answers, root, answer=letter))
        found.append(Baseline(name=f"constant '{letter}'", folder=folder,
                              floor=odds.chance + block * tol, source=source,
                              warn_above=odds.chance + tol))
    gold = {f"{r.get('dataset')}/{r.get('realidx')}": str(r.get("answer_idx"))
            for r in qa_rows(root, "references")}
    found.append(perfect(written(out, "perfect", partial(write_answers, root, answer=gold))))
    return found
