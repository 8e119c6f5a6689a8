"""The QA kit (MedAgentsBench): multiple-choice Pass@1 per dataset, macro over datasets.

Construct is :meth:`QAKit.build` (ingest → de-identify → normalize → difficulty filter →
MELD → review → write vN; the construct flow adds the shared audit-and-publish tail); scoring
reads the run's ``answers.jsonl`` and the pool's private references. A QA pool spans several
dataset cards; every metric any of them lists is computed.
"""

from __future__ import annotations

import re
from collections import defaultdict
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from pydantic import ValidationError

from evaluators.core import InvalidSubmissionError, Track
from evaluators.qa import answered, exact_match
from tasks_lib.audits.baselines import Baseline
from tasks_lib.audits.kit_data import AnswerKeyData
from tasks_lib.qa.pool import load_pool
from tasks_lib.qa.rotation import QARotation
from tasks_lib.qa.runner import ANSWERS as ANSWERS
from tasks_lib.qa.runner import QAAnswer
from tasks_lib.records import CaseScore, RunRecord, ScoreCard
from tasks_lib.settings import get_settings
from tasks_lib.storage import Storage
from tasks_lib.submission_limits import DEFAULT_LIMITS, SubmissionLimits, loads_json, violation
from tasks_lib.taskspec import load_card
from tasks_lib.tracks.base import KITS, BuildRequest, BuiltPool, TrackKit

if TYPE_CHECKING:
    from tasks_lib.qa.run_steps import QAEnvironment



class AnswerLines(NamedTuple):
    """The parsed lines of ``answers.jsonl`` and the refused ones."""

    answers: list[QAAnswer]
    bad: dict[str, str]
    """Item key (``dataset/realidx``, when the line names one) → why its line was refused."""
    unattributed: list[str]
    """Reasons of refused lines that name no item."""


_FIELD = {name: re.compile(rb'"' + name.encode() + rb'"\s*:\s*"?([^",}\s\\]{1,200})')
          for name in ("dataset", "realidx")}


def _item_key(line: bytes) -> str | None:
    """``dataset/realidx`` a refused line names, read from its raw text (it may not parse)."""
    found = [_FIELD[n].search(line) for n in ("dataset", "realidx")]
    if not all(found):
        return None
    return "/".join(m.group(1).decode("utf-8", "replace") for m in found if m)


def read_answers(submission: Path, limits: SubmissionLimits = DEFAULT_LIMITS) -> AnswerLines:
    """The answer lines of a QA submission folder, read within ``limits`` (streamed: file size,
    line length, JSON depth and numbers); a line that breaks a limit or the answer schema is
    refused with a reason naming the file, line and rule. A missing file has no answers."""
    path = submission / ANSWERS
    answers: list[QAAnswer] = []
    bad: dict[str, str] = {}
    loose: list[str] = []
    if path.is_symlink() or not path.is_file():
        if path.is_symlink() or path.exists():
            loose.append(f"{ANSWERS}: not a regular file (rule: files_safe)")
        return AnswerLines(answers, bad, loose)
    if path.stat().st_size > limits.max_table_bytes:
        loose.append(str(violation(ANSWERS, "table_size",
                                   f"larger than {limits.max_table_bytes} bytes")))
        return AnswerLines(answers, bad, loose)
    with path.open("rb") as f:
        for n, line in enumerate(iter(lambda: f.readline(limits.max_line_chars + 1), b""), 1):
            where = f"{ANSWERS} line {n}"
            if len(line) > limits.max_line_chars:
                _refuse(line, str(violation(where, "line_length", f"longer than "
                                            f"{limits.max_line_chars} bytes")), bad, loose)
                rest = line  # skip the remainder of the long line in bounded pieces
                while rest and not rest.endswith(b"\n"):
                    rest = f.readline(limits.max_line_chars)
                continue
            if not line.strip():
                continue
            try:
                answers.append(QAAnswer.model_validate(loads_json(line, where, limits)))
            except InvalidSubmissionError as exc:
                _refuse(line, str(exc), bad, loose)
            except ValidationError as exc:
                first = exc.errors()[0]
                field = ".".join(str(p) for p in first["loc"]) or "line"
                _refuse(line, str(violation(where, "answer_schema",
                                            f"{field}: {first['msg']}")), bad, loose)
    return AnswerLines(answers, bad, loose)


def _refuse(line: bytes, reason: str, bad: dict[str, str], loose: list[str]) -> None:
    key = _item_key(line)
    if key is None:
        loose.append(reason)
    else:
        bad.setdefault(key, reason)


class QAKit(TrackKit):
    """Multiple-choice QA pools."""

    track = Track.QA
    evaluator_version = "qa-exact-match/2"
    supported_metrics = ("exact_match", "answered")
    rotation = QARotation()

    def baselines(self, pool_url: str, out: Path) -> list[Baseline]:
        """No submission, one constant letter per option letter (floor: chance + tolerance)
        and the references (:mod:`tasks_lib.qa.baselines`)."""
        from tasks_lib.qa.baselines import qa_baselines

        return qa_baselines(pool_url, out)

    def answer_key_data(self, pool_url: str) -> AnswerKeyData:
        """Item ids and texts, items stating their answer, gold-option marks
        (:mod:`tasks_lib.qa.audit`)."""
        from tasks_lib.qa.audit import qa_answer_key_data

        return qa_answer_key_data(pool_url)

    def build(self, request: BuildRequest) -> BuiltPool:
        """Ingest → de-identify → normalize → difficulty filter → MELD → expert review (a pause
        of the flow run unless ``auto_approve``) → write vN, over the dataset cards
        ``request.tasks`` (:func:`tasks_lib.qa.construct.construct`; its knobs:
        :data:`tasks_lib.qa.construct.OPTIONS`)."""
        from tasks_lib.qa.construct import construct
        from tasks_lib.qa.steps import n_items

        published = construct(request)
        return BuiltPool(published.url, published.manifest, n_items(published.manifest))

    def item_environment(self, pool_url: str) -> QAEnvironment:
        """QA agents answer the pool's items (:class:`tasks_lib.qa.run_steps.QAEnvironment`)."""
        from tasks_lib.qa.run_steps import QAEnvironment

        return QAEnvironment.open(pool_url)

    def card_metrics(self, datasets: list[str]) -> list[str]:
        """Metrics the pool's dataset cards list, in first-seen order (primary first)."""
        return list(_card_metrics(tuple(datasets), str(get_settings().datasets_dir)))

    def score(self, run: RunRecord, submission: Path) -> ScoreCard:
        """Per item values of every listed metric; per dataset means; macro over datasets."""
        pool = load_pool(Storage(run.pool_url))
        names = self.card_metrics(list(pool.manifest.datasets))
        options = {f"{it.dataset}/{it.realidx}": it.options for it in pool.items}
        first: dict[str, QAAnswer] = {}
        ignored, errors = 0, dict[str, str]()
        lines = read_answers(submission, self.limits)
        for a in lines.answers:
            if a.key not in pool.references:
                ignored += 1
            elif a.error is not None:  # the provider failed: unanswered, with its reason
                errors.setdefault(a.key, f"provider error: {a.error}")
            else:
                first.setdefault(a.key, a)
        per_case, by_ds = [], defaultdict(list)
        for key, ref in pool.references.items():
            got = first.get(key)
            answer = got.answer if got is not None else None
            values = {"exact_match": exact_match(answer, ref.answer_idx),
                      "answered": answered(answer, options[key])}
            values = {n: values[n] for n in names}
            reason = "" if got is not None else lines.bad.get(key) or errors.get(key, "no answer")
            per_case.append(CaseScore(case_id=key, valid=got is not None, reason=reason,
                                      values=values))
            by_ds[ref.dataset].append(values)
        groups = {ds: {n: sum(v[n] for v in rows) / len(rows) for n in names}
                  for ds, rows in sorted(by_ds.items())}
        metrics = {n: sum(g[n] for g in groups.values()) / len(groups) if groups else 0.0
                   for n in names}
        notes = [f"{ignored} answer lines name items not in the pool (ignored)"] if ignored else []
        failed = len(set(errors) - set(first))
        notes += [f"{failed} items unanswered: the provider call failed"] if failed else []
        loose = lines.unattributed + [r for k, r in lines.bad.items()
                                      if k not in pool.references]
        notes += loose[:20]
        if len(loose) > 20:
            notes.append(f"… and {len(loose) - 20} more refused lines")
        return ScoreCard(
            task_id=run.task_id, track=self.track, evaluator_version=self.evaluator_version,
            pool_hash=run.pool_hash, run_id=run.run_id, primary_metric=names[0],
            task_score=metrics[names[0]], metrics=metrics, groups=groups,
            coverage=len(first) / len(pool.references) if pool.references else 0.0,
            per_case=per_case, notes=notes)


@lru_cache(maxsize=32)
def _card_metrics(datasets: tuple[str, ...], datasets_dir: str) -> tuple[str, ...]:
    names: list[str] = []
    kit = KITS.get(Track.QA.value)
    for ds in datasets:
        card = load_card(Track.QA, ds)
        kit.check_card(card)
        names += [m for m in [card.primary_metric, *card.metric_names] if m not in names]
    return tuple(names)


KITS.add(Track.QA.value, QAKit())
