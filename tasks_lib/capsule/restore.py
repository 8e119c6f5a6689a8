"""``medflows import``: a capsule into the configured storage root and ledger.

Every member is checked against ``capsule.json`` first (:func:`tasks_lib.capsule.archive.
open_capsule`), then every conflict with what the storage and ledger hold; only then is anything
written, in the storage layout's own places, so the one score flow and the execute path find
everything where they look:

- a pool carried with its files goes to ``pools/<pool_id>/vN/`` (verified against its lock) and,
  if the exporter's ledger had published it, into the ledger; a pool carried as its manifest
  only must already be published here with the same content hash;
- each run's folder goes to ``runs/<run_id>/`` (its record re-pointed at the pool's place here)
  and its run row into the ledger — but not its score cards: those are the exporter's claims,
  returned for comparison (:func:`differences`); the ledger's score rows are only what this
  medflows computes (``medflows score --run …``);
- call-cache replies (``llm-cache/``) and stage judgements (``judges/``) are added where absent;
  an entry already here is kept (same key, same request: it is this machine's reply).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import NamedTuple

from pydantic import Field

from evaluators.core import Frozen, InputDataError
from tasks_lib.capsule.archive import CapsuleManifest, PoolEntry, file_sha256, open_capsule
from tasks_lib.ledger import store
from tasks_lib.ledger.store import PENDING
from tasks_lib.ledger.tables import PoolRow
from tasks_lib.llm_cache import CACHE_PREFIX
from tasks_lib.pool_format import MANIFEST
from tasks_lib.pool_lock import verify_pool
from tasks_lib.records import RUN_JSON, RunRecord, ScoreCard, run_store
from tasks_lib.scoring import record_run
from tasks_lib.storage import Storage

SHARED = (f"{CACHE_PREFIX}/", "judges/")
"""Members added to the storage root where absent (content-keyed: same key, same request)."""


class ImportedPool(Frozen):
    """Where a capsule's pool version is in this storage root."""

    pool_id: str = Field(description="Pool id.")
    version: int = Field(description="Version.")
    url: str = Field(description="Root URL of the version here.")
    written: bool = Field(description="Its files were written from the capsule (False: the "
                                      "version was already here with this content).")


class ImportSummary(Frozen):
    """What ``medflows import`` did (its JSON output)."""

    capsule: str = Field(description="The capsule file.")
    capsule_sha256: str = Field(description="sha256 of the whole capsule file.")
    scope: str = Field(description="What was exported.")
    private: bool = Field(description="The capsule holds private pool references.")
    pools: list[ImportedPool] = Field(description="Pool versions and where they are now.")
    runs: list[str] = Field(description="Run ids imported (folder, record, ledger row).")
    cache_written: int = Field(description="Call-cache replies and judgements written.")
    cache_kept: int = Field(description="Entries already here, kept as they were.")
    rescore: str = Field(description="The command that re-scores the imported runs.")


class Imported(NamedTuple):
    """The summary, and the score cards the capsule claims (run id → evaluator version → card)."""

    summary: ImportSummary
    claims: dict[str, dict[str, ScoreCard]]


class Place(NamedTuple):
    """Where a capsule's pool version is here."""

    entry: PoolEntry
    url: str
    version: int
    """Its version here (a pool carried without files: the version holding its content)."""
    write: bool
    """Its files are written from the capsule."""


def _pool_place(entry: PoolEntry, unpacked: Path) -> Place:
    """Where ``entry`` lives here and whether its files must be written; refuses a conflict."""
    here = [r for r in store.pools(pool_id=entry.pool_id) if r.kind != PENDING]
    if not entry.files:
        same = [r for r in here if r.content_hash == entry.content_hash]
        if not same:
            raise InputDataError(
                f"pool {entry.pool_id} v{entry.version}", f"the capsule carries no pool files "
                f"and this ledger has no published pool {entry.pool_id} with content "
                f"{entry.content_hash[:12]}…: build it here, or import a capsule exported with "
                "--with-pool-files")
        return Place(entry, same[0].manifest_url.removesuffix(f"/{MANIFEST}"),
                     same[0].version, False)
    for row in store.pools(pool_id=entry.pool_id, version=entry.version):
        if row.content_hash != entry.content_hash:
            raise InputDataError(f"pool {entry.pool_id} v{entry.version}", "this ledger holds "
                                 f"that version with other content ({row.content_hash[:12]}…); "
                                 "import into another storage root and ledger")
    root = Storage.from_settings().child(f"pools/{entry.pool_id}/v{entry.version}")
    if root.exists(MANIFEST):
        found = root.read_json(MANIFEST).get("content_hash")
        if found != entry.content_hash:
            raise InputDataError(root.url(MANIFEST), f"holds other content ({str(found)[:12]}…) "
                                 f"than the capsule's {entry.content_hash[:12]}…")
        return Place(entry, root.root_url, entry.version, False)
    packed = unpacked / "pools" / entry.pool_id / f"v{entry.version}"
    header = json.loads((packed / MANIFEST).read_text(encoding="utf-8"))
    if header.get("content_hash") != entry.content_hash:
        raise InputDataError(f"pools/{entry.pool_id}/v{entry.version}/{MANIFEST}",
                             "its content hash is not the one capsule.json names")
    return Place(entry, root.root_url, entry.version, True)


def _members(unpacked: Path, prefix: str) -> list[tuple[str, Path]]:
    """``(key below prefix, file)`` of every unpacked member under ``prefix``."""
    base = unpacked / prefix
    if not base.is_dir():
        return []
    return sorted((p.relative_to(base).as_posix(), p) for p in base.rglob("*") if p.is_file())


def _check_runs(manifest: CapsuleManifest, unpacked: Path) -> list[RunRecord]:
    """The capsule's run records; a run id this ledger holds for another agent/task/tier is
    refused."""
    runs = []
    for entry in manifest.runs:
        source = f"runs/{entry.run_id}/{RUN_JSON}"
        try:
            run = RunRecord.model_validate_json((unpacked / source).read_bytes())
        except (FileNotFoundError, ValueError) as exc:
            raise InputDataError(source, f"not a run record ({type(exc).__name__})") from None
        for row in store.runs(run_id=run.run_id):
            if (row.agent_id, row.task_id, row.tier) != (run.agent.agent_id, run.task_id,
                                                         run.tier.value):
                raise InputDataError(source, f"run id {run.run_id} belongs to another run in "
                                             f"this ledger ({row.agent_id}, {row.task_id})")
        runs.append(run)
    return runs


def _claims(manifest: CapsuleManifest, unpacked: Path) -> dict[str, dict[str, ScoreCard]]:
    return {e.run_id: {v: ScoreCard.model_validate_json((unpacked / m).read_bytes())
                       for v, m in e.score_cards.items()} for e in manifest.runs}


def _write_pool(entry: PoolEntry, url: str, unpacked: Path) -> None:
    root = Storage(url)
    for key, path in _members(unpacked, f"pools/{entry.pool_id}/v{entry.version}"):
        root.write_bytes(key, path.read_bytes())
    verify_pool(url, entry.content_hash)


def _ledger_pool(entry: PoolEntry, url: str, unpacked: Path) -> None:
    """Publish the version here from the exporter's ledger row (if it had one)."""
    rows = unpacked / "ledger" / "pools.jsonl"
    for line in rows.read_text(encoding="utf-8").splitlines() if rows.is_file() else []:
        data = json.loads(line)
        if (data["pool_id"], data["version"]) == (entry.pool_id, entry.version):
            data.pop("created_at", None)
            store.record_pool(PoolRow(**{**data, "manifest_url": Storage(url).url(MANIFEST)}))


def _write_run(run: RunRecord, place: Place, unpacked: Path) -> None:
    """The run's files (not its score cards), its record pointing at the pool here, its row."""
    folder = run_store(run.run_id)
    for key, path in _members(unpacked, f"runs/{run.run_id}"):
        if key != RUN_JSON and not key.startswith("scores/"):
            folder.write_bytes(key, path.read_bytes())
    record_run(run.model_copy(update={"pool_url": place.url, "pool_version": place.version}))


def _write_shared(unpacked: Path) -> tuple[int, int]:
    """Call-cache replies and judgements where absent; (written, kept)."""
    home, written, kept = Storage.from_settings(), 0, 0
    for prefix in SHARED:
        for key, path in _members(unpacked, prefix.rstrip("/")):
            name = f"{prefix}{key}"
            if home.exists(name):
                kept += 1
                continue
            home.write_bytes(name, path.read_bytes())
            written += 1
    return written, kept


def import_capsule(path: Path) -> Imported:
    """Check the capsule at ``path`` whole, then write it into the configured storage root and
    ledger (see the module docstring).

    Raises:
        InputDataError: a tampered or unreadable capsule (naming the member), or a conflict
            with what is here (naming the pool or run); nothing is written then.
    """
    with tempfile.TemporaryDirectory(prefix="medflows-capsule-") as tmp:
        unpacked = Path(tmp)
        manifest = open_capsule(path, unpacked)
        places = {(p.pool_id, p.version): _pool_place(p, unpacked) for p in manifest.pools}
        runs = _check_runs(manifest, unpacked)
        claims = _claims(manifest, unpacked)
        for place in places.values():
            if place.write:
                _write_pool(place.entry, place.url, unpacked)
            if place.entry.files:
                _ledger_pool(place.entry, place.url, unpacked)
        for run in runs:
            _write_run(run, places[run.pool_id, run.pool_version], unpacked)
        written, kept = _write_shared(unpacked)
    ids = [r.run_id for r in runs]
    summary = ImportSummary(
        capsule=str(path), capsule_sha256=file_sha256(path), scope=manifest.scope,
        private=manifest.private,
        pools=[ImportedPool(pool_id=p.entry.pool_id, version=p.version, url=p.url,
                            written=p.write) for p in places.values()],
        runs=ids, cache_written=written, cache_kept=kept,
        rescore=f"medflows score --run {','.join(ids)}" if ids else "")
    return Imported(summary, claims)


def differences(claimed: ScoreCard, fresh: ScoreCard) -> list[str]:
    """Fields whose values differ between a claimed and a freshly computed card (empty: the
    card is reproduced exactly)."""
    a, b = claimed.model_dump(mode="json"), fresh.model_dump(mode="json")
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
