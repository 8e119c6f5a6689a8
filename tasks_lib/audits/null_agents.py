"""Check 1 of the exploit audit, ``null_agents``: no submission, the public sample submission
and constant answers score at or below the documented floor (``datasets/audit/floors.yaml``),
scored by the track's kit."""

from __future__ import annotations

import posixpath
from pathlib import Path

from evaluators.core import Track
from tasks_lib.audits.pool import PoolInfo, floors, pool_files, qa_rows
from tasks_lib.audits.report import Finding, Severity
from tasks_lib.audits.scoring import imaging_baseline, score_folder, write_answers
from tasks_lib.records import ScoreCard
from tasks_lib.storage import Storage


def _qa_letters(root: Storage) -> tuple[list[str], float, float, int]:
    """Option letters used by the pool, its chance rate, the standard error of a constant
    answer's score around it, and the item count. Like the kit's task score, chance is a macro
    mean over datasets of mean(1/n_options); the error is the macro mean's binomial one."""
    items = [it for it in qa_rows(root, "public_items") if isinstance(it.get("options"), dict)]
    letters = sorted({str(k) for it in items for k in it["options"]})
    by_ds: dict[str, list[float]] = {}
    for it in items:
        by_ds.setdefault(str(it.get("dataset")), []).append(1 / max(len(it["options"]), 1))
    if not by_ds:
        return letters, 0.0, 0.0, 0
    rates = {ds: sum(v) / len(v) for ds, v in by_ds.items()}
    chance = sum(rates.values()) / len(rates)
    var = sum(p * (1 - p) / len(by_ds[ds]) for ds, p in rates.items()) / len(rates) ** 2
    return letters, chance, var ** 0.5, len(items)


def _copy_public_sample(root: Storage, folder: Path) -> bool:
    folder.mkdir(parents=True, exist_ok=True)
    found = False
    for key in pool_files(root, "public/sample_submission"):
        rel = posixpath.relpath(key, "public/sample_submission")
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(root.read_bytes(key))
        found = True
    return found


def _score(card: ScoreCard) -> float:
    return float(card.task_score or 0.0)


BIAS = "answer-position bias: always answering this letter beats chance"
"""Evidence tag of a constant-letter QA agent above its floor (a warning, see docs/audit.md)."""


def check_null_agents(info: PoolInfo, work: Path) -> Finding:
    """Empty submission, public sample and constant answers score at or below their floor."""
    root = Storage(info.url)
    table = floors().get(info.track.value)
    if table is None:
        return Finding(check="null_agents", passed=False, severity=Severity.WARNING,
                       rule="a floor per null agent in datasets/audit/floors.yaml",
                       evidence=[f"no floors for track {info.track.value}"])
    evidence: list[str] = []
    rules: list[str] = []
    scored: list[tuple[str, float, float, str]] = []  # (agent, score, floor, source)
    blocking: list[str] = []  # position bias far beyond the tolerance
    nothing = work / "null-none"
    nothing.mkdir(parents=True)
    scored.append(("no submission", _score(score_folder(info, nothing, "none")),
                   float(table["none"]["floor"]), str(table["none"]["source"])))
    if info.track is Track.QA:
        letters, chance, se, n = _qa_letters(root)
        spec = table["constant"]
        tol = float(spec["tolerance"]["abs"]) + float(spec["tolerance"]["z"]) * se
        rules.append(f"constant letter ≤ chance {chance:.3f} + {tol:.3f} "
                     f"({spec['tolerance']['z']} binomial SE of the macro mean over {n} items + "
                     f"{spec['tolerance']['abs']}): {' '.join(str(spec['source']).split())}")
        for letter in letters:
            folder = work / f"null-constant-{letter}"
            write_answers(root, folder, letter)
            card = score_folder(info, folder, f"constant-{letter}")
            value = _score(card)
            scored.append((f"constant '{letter}'", value, chance + tol, BIAS))
            if value > chance + float(spec.get("block_factor", 3.0)) * tol:
                blocking.append(f"constant '{letter}' scores {value:.4f}, beyond "
                                f"{spec.get('block_factor', 3.0)} tolerances above chance")
    else:
        for kind in ("empty", "constant"):
            folder = work / f"null-{kind}"
            imaging_baseline(info, kind, folder)
            scored.append((f"{kind} baseline", _score(score_folder(info, folder, kind)),
                           float(table[kind]["floor"]), str(table[kind]["source"])))
        sample = work / "null-sample"
        if "sample" in table and _copy_public_sample(root, sample):
            scored.append(("public sample submission",
                           _score(score_folder(info, sample, "sample")),
                           float(table["sample"]["floor"]), str(table["sample"]["source"])))
    for agent, value, floor, source in scored:
        rules.append(f"{agent} ≤ {floor:.3f}")
        if value > floor + 1e-9:
            evidence.append(f"{agent} scores {value:.4f} > floor {floor:.4f} "
                            f"({' '.join(source.split())})")
    summary = "; ".join(f"{a}={v:.4f}" for a, v, _, _ in scored)
    # A skewed label prior (PubMedQA's yes/no/maybe) is reported, not blocking, unless it is far
    # beyond the tolerance; the floors of the other null agents always block.
    only_bias = bool(evidence) and all(BIAS in e for e in evidence) and not blocking
    evidence += blocking
    return Finding(check="null_agents", passed=not evidence,
                   severity=Severity.WARNING if only_bias else Severity.ERROR,
                   rule=f"null agents score at or below the floor ({'; '.join(rules)}); "
                        f"scored: {summary}", evidence=evidence)
