"""Ledger writes and reads of MedBench v4 submissions: submitters, registered endpoints,
downloaded splits, version-locked submissions and rate-limit events.

Admission is one transaction: the submitter's row is locked (``SELECT … FOR UPDATE`` on
PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` serialises every writer), the rolling limits are
checked against the accepted events, and then either the refusal is logged or the usage events
and the submission row (next version of its lock) are inserted. Two concurrent uploads of one
submitter therefore never both pass a limit and never get the same version. An upload that
carries the digest of its bytes (``body_sha256``) and finds a row of the same lock with the same
digest inside that transaction is that row: nothing is charged and no version is added.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, func, select

from tasks_lib.ledger.store import session
from tasks_lib.ledger.tables import (
    EndpointRow,
    RateEventRow,
    SplitRow,
    SubmissionRow,
    SubmitterRow,
)
from tasks_lib.medbench.ratelimit import Event, Limit, Refusal, check

LOCK_FIELDS = ("submitter", "model_name", "model_version", "pool_id", "pool_version",
               "evaluator_version")
"""Columns of a submission's version lock; a new upload for the same values is a new version."""


def add_submitter(row: SubmitterRow, url: str | None = None) -> bool:
    """Insert a submitter; False (nothing written) when the name exists."""
    try:
        with session(url) as s:
            if s.get(SubmitterRow, row.name) is not None:
                return False
            s.add(row)
    except IntegrityError:  # a concurrent insert of the same name won
        return False
    return True


def get_submitter(name: str, url: str | None = None) -> SubmitterRow | None:
    """The submitter called ``name``."""
    with session(url) as s:
        return s.get(SubmitterRow, name)


def submitter_by_key_id(key_id: str, url: str | None = None) -> SubmitterRow | None:
    """The submitter whose API key has the public half ``key_id``."""
    with session(url) as s:
        return s.exec(select(SubmitterRow).where(SubmitterRow.key_id == key_id)).first()


def set_key(name: str, key_id: str, salt: str, digest: str, url: str | None = None) -> None:
    """Replace a submitter's API key (the old key stops working)."""
    with session(url) as s:
        row = s.get(SubmitterRow, name)
        if row is None:
            raise KeyError(name)
        row.key_id, row.key_salt, row.key_hash = key_id, salt, digest
        s.add(row)


def add_endpoint(row: EndpointRow, url: str | None = None) -> EndpointRow | None:
    """Register a model endpoint; None when ``(submitter, model_name, model_version)`` is
    already registered (a registered endpoint is never replaced)."""
    try:
        with session(url) as s:
            s.add(row)
            s.flush()
            s.refresh(row)
            return row
    except IntegrityError:
        return None


def endpoints(url: str | None = None, **filters: Any) -> list[EndpointRow]:
    """Registered endpoints matching equality filters, oldest first."""
    with session(url) as s:
        query = select(EndpointRow).order_by(EndpointRow.id)  # type: ignore[arg-type]
        for name, value in filters.items():
            query = query.where(getattr(EndpointRow, name) == value)
        return list(s.exec(query).all())


def add_split(row: SplitRow, url: str | None = None) -> None:
    """Record a downloaded split (its id is random and new)."""
    with session(url) as s:
        s.add(row)


def get_split(split_id: str, url: str | None = None) -> SplitRow | None:
    """The split ``split_id``."""
    with session(url) as s:
        return s.get(SplitRow, split_id)


def submissions(url: str | None = None, **filters: Any) -> list[SubmissionRow]:
    """Submissions matching equality filters, oldest first."""
    with session(url) as s:
        query = select(SubmissionRow).order_by(SubmissionRow.id)  # type: ignore[arg-type]
        for name, value in filters.items():
            query = query.where(getattr(SubmissionRow, name) == value)
        return list(s.exec(query).all())


def rate_events(submitter: str, url: str | None = None) -> list[RateEventRow]:
    """Every rate event of ``submitter`` (accepted and refused), oldest first."""
    with session(url) as s:
        return list(s.exec(select(RateEventRow).where(RateEventRow.submitter == submitter)
                           .order_by(RateEventRow.id)).all())  # type: ignore[arg-type]


class Admission(NamedTuple):
    """The outcome of :func:`admit`: the refusal, or the inserted submission (None when the
    request inserts none, e.g. a download); ``created`` is False when the submission is an
    earlier one with the same lock and bytes."""

    refusal: Refusal | None
    submission: SubmissionRow | None
    created: bool = True


class Charge(NamedTuple):
    """``n`` units a request uses under ``limit``."""

    limit: Limit
    n: int


def _lock_submitter(s: Session, name: str) -> SubmitterRow:
    row = s.exec(select(SubmitterRow).where(SubmitterRow.name == name)
                 .with_for_update()).first()
    if row is None:
        raise KeyError(name)
    return row


def _refusal(s: Session, submitter: str, charges: Sequence[Charge],
             now: float) -> Refusal | None:
    for charge in charges:
        since = now - charge.limit.window_s
        rows = s.exec(select(RateEventRow.at, RateEventRow.n).where(
            RateEventRow.submitter == submitter, RateEventRow.kind == charge.limit.kind.value,
            RateEventRow.refused == False,  # noqa: E712  (SQL expression)
            RateEventRow.at > since)).all()
        refusal = check([Event(at, n) for at, n in rows], charge.limit, charge.n, now)
        if refusal is not None:
            return refusal
    return None


def _same_upload(s: Session, row: SubmissionRow) -> SubmissionRow | None:
    if row.body_sha256 is None:
        return None
    query = select(SubmissionRow).where(SubmissionRow.body_sha256 == row.body_sha256)
    for name in LOCK_FIELDS:
        query = query.where(getattr(SubmissionRow, name) == getattr(row, name))
    return s.exec(query.order_by(SubmissionRow.version)).first()  # type: ignore[arg-type]


def find_upload(row: SubmissionRow, url: str | None = None) -> SubmissionRow | None:
    """The submission with ``row``'s lock and ``body_sha256`` (None: none, or no digest)."""
    with session(url) as s:
        return _same_upload(s, row)


def _next_version(s: Session, row: SubmissionRow) -> int:
    query = select(func.max(SubmissionRow.version))
    for name in LOCK_FIELDS:
        query = query.where(getattr(SubmissionRow, name) == getattr(row, name))
    return int(s.exec(query).one() or 0) + 1


def admit(submitter: str, charges: Sequence[Charge], now: float,
          submission: SubmissionRow | None = None, url: str | None = None,
          run_id_of: Callable[[int], str] | None = None) -> Admission:
    """Check ``charges`` against the submitter's rolling limits and use them, in one transaction.

    Args:
        submitter: Account name (must exist).
        charges: Units the request uses under each limit.
        now: Current unix time.
        submission: A submission to insert when admitted; its ``version`` is replaced by the
            next version of its lock (:data:`LOCK_FIELDS`).
        run_id_of: Names the submission's run from its version (default: keep ``run_id``).

    Returns:
        The refusal (logged as refused events, which use nothing), the inserted submission, or
        the earlier submission of the same lock and bytes (``created`` False, nothing charged).
    """
    with session(url) as s:
        _lock_submitter(s, submitter)
        same = _same_upload(s, submission) if submission is not None else None
        if same is not None:
            return Admission(None, same, created=False)
        refusal = _refusal(s, submitter, charges, now)
        used = [RateEventRow(submitter=submitter, kind=c.limit.kind.value, n=c.n, at=now,
                             refused=refusal is not None) for c in charges]
        s.add_all(used)
        if refusal is not None or submission is None:
            return Admission(refusal, None)
        version = _next_version(s, submission)
        run_id = run_id_of(version) if run_id_of else submission.run_id
        row = SubmissionRow(**{**submission.model_dump(exclude={"id"}), "version": version,
                               "run_id": run_id})
        s.add(row)
        s.flush()
        s.refresh(row)
        return Admission(None, row)
