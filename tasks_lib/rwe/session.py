"""The one submit action of an RWE run: ``submit_answers`` (``../shared/specs/rwe.md`` §4).

A call checks progress, records well-typed answers (final once recorded: a second answer to the
same question is refused and the first stands), rejects malformed ones without consuming the
question (each counts as an invalid output), and returns the follow-up questions the answers
unlocked. It is refused until the cohort audit table exists in the workspace; the table is
frozen into the submission at the first accepted call, so the cohort precedes every answer.

What scoring reads is written after every call to ``submission/``: ``answers.json``
(:class:`SessionRecord`) and ``cohort.csv`` (the frozen audit table).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from pydantic import Field

from evaluators.core import Frozen, InvalidSubmissionError
from evaluators.graders.rwe_answers import QuestionTree, RawAnswer, check_answer, visible
from tasks_lib.rwe.questions import question_tree
from tasks_lib.rwe.types import PublicStudy, StudyAnswers

ANSWERS_FILE = "answers.json"
"""Session record in the submission folder."""

COHORT_FILE = "cohort.csv"
"""Frozen cohort audit table in the submission folder."""

MAX_COHORT_BYTES = 64 * 2**20
"""Largest cohort file the session copies (50,000 rows of a few columns fit easily)."""


class SessionRecord(Frozen):
    """Everything the session recorded (``submission/answers.json``)."""

    study_id: str = Field(description="Study (task) id.")
    answers: dict[str, RawAnswer] = Field(default_factory=dict,
                                          description="Question id → final answer.")
    order: list[str] = Field(default_factory=list, description="Question ids as answered.")
    submit_calls: int = Field(default=0, description="submit_answers calls (incl. refused).")
    invalid_outputs: int = Field(default=0, description="Refused or malformed answers.")
    cohort_sha256: str | None = Field(default=None, description="sha256 of the frozen cohort.")
    steps: int = Field(default=0, description="Agent interaction steps (set when the run ends).")
    end: str | None = Field(default=None, description="Why the run ended.")


class SubmitReply(Frozen):
    """What ``submit_answers`` tells the agent."""

    accepted: list[str] = Field(description="Question ids recorded by this call.")
    rejected: dict[str, str] = Field(description="Question id → why it was not recorded.")
    revealed: list[dict[str, Any]] = Field(description="Questions newly shown by this call.")
    unanswered: list[str] = Field(description="Visible questions still unanswered.")
    invalid: int = Field(description="Invalid outputs in this call.")
    message: str = Field(description="One line for the agent.")

    def text(self) -> str:
        """The reply as the agent reads it (JSON)."""
        return self.model_dump_json(indent=1)


class AnswerSession:
    """The host side of one run's ``submit_answers`` tool.

    Args:
        study: the public study (protocol and tree).
        key: the study's private reference answers (the session reads only the MCQ letters,
            to decide what an answer unlocks; nothing of it is sent to the agent).
        workspace: the agent's workspace (where the cohort file must appear).
        submission: the run's submission folder (written after every call).
    """

    def __init__(self, study: PublicStudy, key: StudyAnswers, workspace: Path,
                 submission: Path) -> None:
        self.study, self.workspace, self.submission = study, workspace, submission
        self.tree: QuestionTree = question_tree(study, key)
        self.record = SessionRecord(study_id=study.study_id)
        self.cohort_name = study.protocol.cohort.file
        submission.mkdir(parents=True, exist_ok=True)
        self._save()

    def _save(self) -> None:
        (self.submission / ANSWERS_FILE).write_text(self.record.model_dump_json(indent=1),
                                                    encoding="utf-8")

    def _update(self, **changes: Any) -> None:
        self.record = self.record.model_copy(update=changes)
        self._save()

    def describe(self, question_id: str) -> dict[str, Any]:
        """The public description of one question (never its answer)."""
        for sentence in self.study.sentences:
            if sentence.mcq is not None and sentence.mcq.id == question_id:
                return {"id": question_id, "kind": "mcq", "stem": sentence.mcq.stem,
                        "options": sentence.mcq.options}
            for f in sentence.fields:
                if f.id == question_id:
                    return {"id": f.id, "kind": f.type.value, "label": f.label,
                            "sentence": sentence.text,
                            **({"pair_of": f.pair_of, "bound": f.bound} if f.pair_of else {})}
        raise KeyError(question_id)

    def visible(self) -> list[str]:
        """Visible question ids given the recorded answers."""
        return visible(self.tree, self.record.answers)

    def _freeze_cohort(self) -> str | None:
        """Copy the workspace's cohort file into the submission once; an error text if absent."""
        if self.record.cohort_sha256 is not None:
            return None
        source = self.workspace / self.cohort_name
        if source.is_symlink() or not source.is_file():
            return (f"refused: write the cohort audit table to /workspace/{self.cohort_name} "
                    "(one row per included patient) before submitting answers")
        if source.stat().st_size > MAX_COHORT_BYTES:
            return f"refused: the cohort file is larger than {MAX_COHORT_BYTES} bytes"
        target = self.submission / COHORT_FILE
        shutil.copyfile(source, target)
        digest = hashlib.sha256(target.read_bytes()).hexdigest()
        self._update(cohort_sha256=digest)
        return None

    def submit_answers(self, answers: dict[str, RawAnswer]) -> SubmitReply:
        """Check progress, record answers and return what they unlocked (see the module doc).

        Answers count only for questions shown before this call: a gated field is answerable
        in the call after the one whose right MCQ answer revealed it."""
        calls = self.record.submit_calls + 1
        refusal = self._freeze_cohort()
        if refusal is not None:
            self._update(submit_calls=calls, invalid_outputs=self.record.invalid_outputs + 1)
            return SubmitReply(accepted=[], rejected={}, revealed=[], unanswered=[],
                               invalid=1, message=refusal)
        before = self.visible()
        recorded = dict(self.record.answers)
        order, rejected = list(self.record.order), {}
        for qid, raw in answers.items():
            reason = self._check(qid, raw, before, recorded)
            if reason:
                rejected[qid] = reason
                continue
            recorded[qid] = raw
            order.append(qid)
        accepted = [q for q in order if q not in self.record.order]
        self._update(answers=recorded, order=order, submit_calls=calls,
                     invalid_outputs=self.record.invalid_outputs + len(rejected))
        now = self.visible()
        revealed = [self.describe(q) for q in now if q not in before]
        unanswered = [q for q in now if q not in recorded]
        message = (f"{len(accepted)} recorded, {len(rejected)} refused; {len(unanswered)} "
                   f"visible question(s) unanswered")
        return SubmitReply(accepted=accepted, rejected=rejected, revealed=revealed,
                           unanswered=unanswered, invalid=len(rejected),
                           message=message)

    def _check(self, qid: str, raw: RawAnswer, shown: list[str],
               recorded: dict[str, RawAnswer]) -> str:
        """Why ``raw`` cannot be recorded for ``qid`` ('' = it can)."""
        if qid in recorded:
            return "already answered: answers are final, the first one stands"
        if qid not in shown:
            known = any(q.question_id == qid for q in self.tree.questions)
            return "not revealed" if known else "unknown question id"
        try:
            check_answer(self.tree.get(qid), raw)
        except InvalidSubmissionError as exc:
            return f"malformed: {exc}"
        return ""

    def opening(self) -> list[dict[str, Any]]:
        """The questions visible before any answer (MCQ gates and ungated fields)."""
        return [self.describe(q) for q in self.visible()]

    def opening_text(self) -> str:
        """The opening questions as the agent reads them (JSON)."""
        return json.dumps(self.opening(), indent=1)

    def finish(self, steps: int, end: str) -> SessionRecord:
        """Record the step count and why the run ended."""
        self._update(steps=steps, end=end)
        return self.record


def read_record(submission: Path) -> SessionRecord:
    """The session record of a stored submission (agent's fault if missing or broken)."""
    path = submission / ANSWERS_FILE
    if not path.is_file() or path.is_symlink():
        raise InvalidSubmissionError(f"{ANSWERS_FILE} missing: the run never started a session")
    try:
        return SessionRecord.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except ValueError as exc:
        raise InvalidSubmissionError(f"{ANSWERS_FILE} is not a session record: {exc}") from None
