"""Answer-upload mode, upload side: validate a predictions file against its split, lock it, and
store it as an ordinary run that the one score flow scores.

An upload is refused as a whole, with every bad line reported as ``file:line: reason`` and
nothing written (no run, no submission row, no rate-limit usage), when a line is not a valid
prediction row, repeats an item, names an item outside its split or the split of another
submitter, has the wrong shape for its item's answer type, or when the split has expired. A valid
file may leave items out: they count as unanswered (the kit scores them 0).

Every line is strict JSON (:mod:`tasks_lib.strict_json`: no NaN/Infinity, numbers within
±1e15, valid Unicode, bounded depth); a file holds at most :data:`MAX_LINES` lines.

An accepted upload is version-locked to ``(submitter, model name, model version string, subset
id + version, evaluator version)`` and appended to the ledger: a second upload with other bytes
for the same lock becomes version 2, never an overwrite. Its predictions are mapped back to the
pool's item ids and option letters and stored as ``runs/<run_id>/submission/predictions.jsonl``
with a :class:`~tasks_lib.records.RunRecord`; the caller then runs the one score flow on
``run_id``.

Crash safety (kill -9 at any point leaves nothing or a resumable state): the run id is derived
from the lock and the SHA-256 of the uploaded bytes; the predictions are stored first, then the
submission row (with ``body_sha256``) is inserted in the same transaction as the rate charge,
then the run record is written, then the caller scores. A re-upload of the same bytes by the same
submitter for the same lock is that same version: nothing is charged, a missing predictions
file or run record is written again, and the caller scores it if it has no score yet.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterator
from typing import NamedTuple

from pydantic import Field

from evaluators.core import Frozen, InputDataError, RunStatus, Tier, Track
from tasks_lib.agents import AgentSpec, Harness
from tasks_lib.ledger import medbench as ledger
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import SplitRow, SubmissionRow
from tasks_lib.medbench.accounts import RateLimited, Submitter, check_name, limits
from tasks_lib.medbench.items import SUBMISSION_FILE, AnswerType, Prediction, parse_prediction
from tasks_lib.medbench.splits import SplitEntry, mapping, split_of
from tasks_lib.records import SUBMISSION, RunRecord, run_store
from tasks_lib.scoring import record_run
from tasks_lib.tracks.base import kit_for

MAX_REPORTED = 20
"""Bad lines listed in an upload's error report (all are counted)."""
MAX_LINES = 200_000
"""Lines an upload may hold (more: refused at the first line past it)."""
MAX_SPLIT_LOOKUPS = 20
"""Split ids (those named by most lines) looked up in the ledger to find an upload's split."""
_LETTER = re.compile(r"(?<![A-Za-z])[A-Za-z](?![A-Za-z])")


class LineError(Frozen):
    """One bad line of an upload."""

    line: int | None = Field(description="1-based line (None: the file as a whole).")
    reason: str = Field(description="What is wrong.")


class UploadRejected(InputDataError):
    """An upload refused as a whole; ``errors`` lists the bad lines (first
    :data:`MAX_REPORTED`), ``n_errors`` counts them all."""

    def __init__(self, source: str, errors: list[LineError], n_errors: int) -> None:
        super().__init__(source, errors[0].reason, errors[0].line)
        self.errors, self.n_errors = errors, n_errors
        where = [f"{source}:{e.line}: {e.reason}" if e.line else f"{source}: {e.reason}"
                 for e in errors[:5]]
        more = f"; +{n_errors - 5} more bad lines" if n_errors > 5 else ""
        self.args = (f"{'; '.join(where)}{more} (upload refused, nothing stored)",)


class Stored(NamedTuple):
    """An accepted upload: its submission row, and whether this upload created it (False: the
    same bytes were uploaded before for the same lock)."""

    row: SubmissionRow
    created: bool


class Checked(NamedTuple):
    """A valid upload: its split and its predictions with pool item ids and letters."""

    split: SplitRow
    predictions: list[Prediction]


def _shape_error(answer: object, answer_type: AnswerType) -> str | None:
    if answer is None:
        return None
    if answer_type in (AnswerType.SINGLE_CHOICE, AnswerType.OPEN_ENDED, AnswerType.STRING):
        return None if isinstance(answer, str) else "must be a string (or null)"
    if not isinstance(answer, list):
        return "must be a list (or null)"
    if answer_type is AnswerType.MULTI_LABEL:
        ok = all(isinstance(a, str) for a in answer)
        return None if ok else "must be a list of label strings"
    if answer_type is AnswerType.EXTRACTION:
        ok = all(isinstance(a, list) and len(a) == 2 and all(isinstance(v, str) for v in a)
                 for a in answer)
        return None if ok else "must be a list of [type, value] string pairs"
    ok = all(isinstance(a, list) and len(a) == 4 and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in a) for a in answer)
    return None if ok else "must be a list of [x1, y1, x2, y2] number boxes"


def original_letter(answer: str, letters: dict[str, str]) -> str:
    """A single-choice answer with its one option letter (shown in the split) replaced by the
    pool item's letter, case and punctuation kept; an answer naming no option or several
    letters is returned unchanged."""
    found = _LETTER.findall(answer)
    if len(found) != 1 or found[0].upper() not in letters:
        return answer
    mapped = letters[found[0].upper()]
    mapped = mapped if found[0].isupper() else mapped.lower()
    return _LETTER.sub(mapped, answer, count=1)


def _to_pool(pred: Prediction, entry: SplitEntry) -> Prediction:
    answer = pred.answer
    if entry.letters and isinstance(answer, str):
        answer = original_letter(answer, entry.letters)
    return Prediction(item_id=entry.item_id, answer=answer, error=pred.error,
                      tool_calls=pred.tool_calls)


def _candidates(lines: list[tuple[int, Prediction]]) -> list[str]:
    """Split ids named by the item ids, most lines first (ties: the earliest line first)."""
    counts: dict[str, int] = {}
    for _, p in lines:
        sid = split_of(p.item_id)
        counts[sid] = counts.get(sid, 0) + 1
    return sorted((s for s in counts if s), key=lambda s: -counts[s])[:MAX_SPLIT_LOOKUPS]


def _split_for(lines: list[tuple[int, Prediction]], source: str, submitter: str,
               now: float) -> SplitRow | None:
    """The downloaded split the upload answers: of the split ids its item ids name, the one
    named by most lines that the ledger holds (None: none is; every line is then reported).

    Raises:
        UploadRejected: that split is another submitter's or has expired (the file as a whole).
    """
    row = next((r for sid in _candidates(lines) if (r := ledger.get_split(sid)) is not None),
               None)
    if row is None:
        return None
    if row.submitter is not None and row.submitter != submitter:
        raise UploadRejected(source, [LineError(line=None, reason=(
            f"split {row.split_id} was downloaded by another submitter"))], 1)
    if now > row.expires_at:
        raise UploadRejected(source, [LineError(line=None, reason=(
            f"split {row.split_id} expired; download a new one"))], 1)
    return row


def _lines(raw: str) -> Iterator[str]:
    """The ``\n``-separated lines of ``raw``, one at a time (no list of them all)."""
    start = 0
    while start <= len(raw):
        end = raw.find("\n", start)
        end = len(raw) if end < 0 else end
        yield raw[start:end]
        start = end + 1


def _parse(text: bytes, source: str) -> tuple[list[tuple[int, Prediction]], list[LineError]]:
    try:
        raw = text.decode("utf-8")
    except UnicodeDecodeError as exc:
        at = text.count(b"\n", 0, exc.start) + 1
        why = f"not UTF-8 ({exc.reason} at byte {exc.start})"
        raise UploadRejected(source, [LineError(line=at, reason=why)], 1) from None
    good: list[tuple[int, Prediction]] = []
    errors: list[LineError] = []
    for n, line in enumerate(_lines(raw), 1):
        if n > MAX_LINES and (line.strip() or n > MAX_LINES + 1):
            why = f"more than {MAX_LINES} lines"
            raise UploadRejected(source, [LineError(line=n, reason=why)], 1)
        if not line.strip():
            continue
        try:
            good.append((n, parse_prediction(line.removesuffix("\r"), source, n)))
        except InputDataError as exc:
            errors.append(LineError(line=n, reason=exc.reason))
    return good, errors


def _line_errors(lines: list[tuple[int, Prediction]], split: SplitRow | None
                 ) -> list[LineError]:
    """Every line whose item id repeats, is not an item of ``split`` (None: no downloaded split
    holds any of them) or whose answer has the wrong shape for its item."""
    entries = mapping(split).entries if split is not None else {}
    sid = split.split_id if split is not None else ""
    errors: list[LineError] = []
    seen: dict[str, int] = {}
    for n, pred in lines:
        entry = entries.get(pred.item_id)
        if pred.item_id in seen:
            errors.append(LineError(line=n, reason=f"item_id {pred.item_id!r} repeats line "
                                                   f"{seen[pred.item_id]}"))
        elif entry is None:
            errors.append(LineError(line=n, reason=f"item_id {pred.item_id!r} "
                                                   f"{_not_in(split_of(pred.item_id), sid)}"))
        elif (why := _shape_error(pred.answer, entry.answer_type)) is not None:
            errors.append(LineError(line=n, reason=f"answer: {entry.answer_type.value} "
                                                   f"answer {why}"))
        seen.setdefault(pred.item_id, n)
    return errors


def _not_in(named: str, split_id: str) -> str:
    if not split_id:
        return ("belongs to no downloaded split (download one with medflows medbench "
                "download)")
    if named in ("", split_id):
        return f"is not an item of split {split_id}"
    return f"is not an item of split {split_id} (it names another split)"


def check_upload(text: bytes, source: str, submitter: str, now: float | None = None) -> Checked:
    """Validate every line of an upload against its split; raises :class:`UploadRejected`
    (nothing written; every bad line counted, the first :data:`MAX_REPORTED` listed) or
    returns the predictions mapped to pool item ids and letters."""
    now = time.time() if now is None else now
    lines, errors = _parse(text, source)
    if not lines and not errors:
        raise UploadRejected(source, [LineError(line=None, reason="no predictions")], 1)
    split = _split_for(lines, source, submitter, now)
    errors += _line_errors(lines, split)
    if errors or split is None:
        errors.sort(key=lambda e: e.line or 0)
        raise UploadRejected(source, errors[:MAX_REPORTED], len(errors))
    entries = mapping(split).entries
    return Checked(split, [_to_pool(p, entries[p.item_id]) for _, p in lines])


class SubmissionView(Frozen):
    """A submission as its submitter reads it: the lock, the version and the newest score (no
    per-item values, no reference)."""

    submission_id: int = Field(description="Ledger id of the submission.")
    submitter: str = Field(description="Account that submitted.")
    model_name: str = Field(description="Model name.")
    model_version: str = Field(description="Model version string (part of the lock).")
    pool_id: str = Field(description="Subset (or pool) id.")
    pool_version: int = Field(description="Subset version (part of the lock).")
    pool_hash: str = Field(description="Content hash of that version.")
    evaluator_version: str = Field(description="Evaluator version (part of the lock).")
    version: int = Field(description="1 + earlier submissions with the same lock.")
    mode: str = Field(description="'upload' (answer-upload mode) or 'api' (API mode).")
    split_id: str | None = Field(description="Split the predictions answer.")
    run_id: str = Field(description="The run the upload is stored as.")
    n_predictions: int = Field(description="Prediction lines received.")
    created_at: str = Field(description="When it was accepted (ISO 8601).")
    scored: bool = Field(description="A score row exists for the run.")
    task_score: float | None = Field(default=None, description="Overall score (0–100).")
    coverage: float | None = Field(default=None, description="Answered / expected items.")
    metrics: dict[str, float] = Field(default_factory=dict, description="Task-level metrics.")
    groups: dict[str, dict[str, float]] = Field(default_factory=dict,
                                                description="Metrics per task / dimension.")


def view(row: SubmissionRow) -> SubmissionView:
    """The submission with its newest score row."""
    assert row.id is not None
    scores = store.scores_for([row.run_id])
    base = SubmissionView(
        submission_id=row.id, submitter=row.submitter, model_name=row.model_name,
        model_version=row.model_version, pool_id=row.pool_id, pool_version=row.pool_version,
        pool_hash=row.pool_hash, evaluator_version=row.evaluator_version, version=row.version,
        mode=row.mode, split_id=row.split_id, run_id=row.run_id,
        n_predictions=row.n_predictions, created_at=row.created_at.isoformat(),
        scored=bool(scores))
    if not scores:
        return base
    newest = scores[-1]
    return base.model_copy(update={
        "task_score": newest.task_score, "coverage": newest.coverage,
        "metrics": json.loads(newest.metrics_json), "groups": json.loads(newest.groups_json)})


def _store_predictions(checked: Checked, run_id: str) -> None:
    lines = "".join(p.model_dump_json() + "\n" for p in checked.predictions)
    run_store(run_id).child(SUBMISSION).write_text(SUBMISSION_FILE, lines)


def _drop_predictions(run_id: str) -> None:
    folder = run_store(run_id).child(SUBMISSION)
    if folder.exists(SUBMISSION_FILE):
        folder.fs.rm(folder.path(SUBMISSION_FILE))


def _record(checked: Checked, row: SubmissionRow, submitter: Submitter) -> None:
    """Store the run record (and the ledger's run row) of stored predictions."""
    split = checked.split
    agent = AgentSpec(
        agent_id=f"{submitter.name}/{row.model_name}@{row.model_version}",
        harness=Harness.UPLOAD, model=row.model_name, method="medbench-upload",
        params={"submitter": submitter.name, "model_version": row.model_version,
                "split_id": split.split_id, "submission_version": row.version})
    record_run(RunRecord(
        run_id=row.run_id, agent=agent, task_id=split.pool_id, track=Track.MEDBENCH,
        tier=Tier.STANDARD, status=RunStatus.COMPLETED, pool_url=split.pool_url,
        pool_id=split.pool_id, pool_version=split.pool_version, pool_hash=split.pool_hash,
        n_items=split.n_items,
        n_answered=sum(p.answer is not None and p.error is None for p in checked.predictions)))


def _lock_row(checked: Checked, text: bytes, submitter: Submitter, model_name: str,
              model_version: str) -> SubmissionRow:
    """The submission row an upload would insert (version 0: set at admission); its run id is
    derived from the lock and the digest of the bytes."""
    split = checked.split
    row = SubmissionRow(
        submitter=submitter.name, model_name=model_name, model_version=model_version,
        pool_id=split.pool_id, pool_version=split.pool_version, pool_hash=split.pool_hash,
        evaluator_version=kit_for(Track.MEDBENCH).evaluator_version, version=0, mode="upload",
        split_id=split.split_id, run_id="", n_predictions=len(checked.predictions),
        body_sha256=hashlib.sha256(text).hexdigest())
    lock = "\0".join(str(getattr(row, f)) for f in (*ledger.LOCK_FIELDS, "body_sha256"))
    row.run_id = "mbsub-" + hashlib.sha256(lock.encode()).hexdigest()[:16]
    return row


def _resume(checked: Checked, row: SubmissionRow, submitter: Submitter) -> None:
    """Write again what a killed upload of ``row`` may have left out (predictions, run)."""
    if store.scores_for([row.run_id]):
        return
    _store_predictions(checked, row.run_id)
    if not store.runs(run_id=row.run_id) or not run_store(row.run_id).exists("run.json"):
        _record(checked, row, submitter)


def store_upload(text: bytes, source: str, submitter: Submitter, model_version: str,
                 model_name: str | None = None, now: float | None = None) -> Stored:
    """Validate, rate-limit, lock and store an upload as a run (not scored yet); the same bytes
    for the same lock again return the earlier version (resumed, not charged).

    Raises:
        UploadRejected: A bad file (nothing written).
        RateLimited: Over the uploads-per-day or items-per-minute limit (the refusal is logged;
            nothing else is kept).
    """
    now = time.time() if now is None else now
    name = check_name(model_name or submitter.name)
    if not model_version.strip() or len(model_version) > 128 or not model_version.isprintable():
        raise InputDataError("model version", "must be 1–128 printable characters")
    checked = check_upload(text, source, submitter.name, now)
    row = _lock_row(checked, text, submitter, name, model_version)
    earlier = ledger.find_upload(row)
    if earlier is not None:
        _resume(checked, earlier, submitter)
        return Stored(earlier, False)
    _store_predictions(checked, row.run_id)
    uploads, items = limits(submitter)
    outcome = ledger.admit(submitter.name, [ledger.Charge(uploads, 1),
                                            ledger.Charge(items, len(checked.predictions))],
                           now, row)
    if outcome.refusal is not None:
        _drop_predictions(row.run_id)
        raise RateLimited(outcome.refusal)
    assert outcome.submission is not None
    if not outcome.created:
        _resume(checked, outcome.submission, submitter)
    else:
        _record(checked, outcome.submission, submitter)
    return Stored(outcome.submission, outcome.created)


def submit_upload(text: bytes, source: str, submitter: Submitter, model_version: str,
                  model_name: str | None = None, now: float | None = None) -> SubmissionRow:
    """:func:`store_upload`, returning the submission row only."""
    return store_upload(text, source, submitter, model_version, model_name, now).row
