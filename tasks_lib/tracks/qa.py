"""The QA kit (MedAgentsBench): multiple-choice Pass@1 per dataset, macro over datasets.

Construct is the ``construct-qa`` flow (ingest → de-identify → normalize → difficulty filter →
MELD → review → publish); scoring reads the run's ``answers.jsonl`` and the pool's private
references. A QA pool spans several dataset cards; every metric any of them lists is computed.
"""

from __future__ import annotations

from collections import defaultdict
from functools import lru_cache
from pathlib import Path

from evaluators.core import Track
from evaluators.qa import answered, exact_match
from tasks_lib.qa.pool import load_pool
from tasks_lib.qa.runner import QAAnswer
from tasks_lib.records import CaseScore, RunRecord, ScoreCard
from tasks_lib.settings import get_settings
from tasks_lib.storage import Storage
from tasks_lib.taskspec import load_card
from tasks_lib.tracks.base import KITS, TrackKit

ANSWERS = "answers.jsonl"


def read_answers(submission: Path) -> list[QAAnswer]:
    """The answer lines of a QA submission folder (the first answer per item counts)."""
    return [QAAnswer.model_validate(r) for r in Storage(str(submission)).read_jsonl(ANSWERS)]


class QAKit(TrackKit):
    """Multiple-choice QA pools."""

    track = Track.QA
    evaluator_version = "qa-exact-match/2"
    supported_metrics = ("exact_match", "answered")

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
        for a in read_answers(submission):
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
            reason = "" if got is not None else errors.get(key, "no answer")
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
