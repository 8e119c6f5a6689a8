"""What a capsule carries, and writing it (``medflows export``).

A capsule of runs holds, for each run, ``runs/<run_id>/`` as stored (run record, submission,
trace, score cards, the call journal; not the research cell's ``workspace/`` scratch, which
scoring never reads), the call-cache replies its journal lists (``llm-cache/…``), the stage
judgements of a research cell (``judges/…``), its pool version's manifest — and with
``with_pool_files`` every file of that version (public view, private references, audit and lock
records) — the cards of its tasks (``cards/<task_id>.json``) and its ledger rows
(``ledger/{pools,runs,scores}.jsonl``).

Without pool files a capsule holds no reference: it can be shared, and re-scored only where
the same pool content is already published. With them it re-scores anywhere and is private.
"""

from __future__ import annotations

import hashlib
import posixpath
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import NamedTuple

from evaluators.core import InputDataError
from tasks_lib.capsule.archive import FORMAT, CapsuleManifest, CapsuleWriter, PoolEntry, RunEntry
from tasks_lib.ledger import store
from tasks_lib.ledger.tables import PoolRow, RunRow, ScoreRow
from tasks_lib.llm_cache import CACHE_PREFIX, cache_path, read_journal
from tasks_lib.pool_format import MANIFEST, jsonl_bytes
from tasks_lib.pool_lock import SUBSET_JSON
from tasks_lib.records import TRACE, RunRecord, run_store
from tasks_lib.scoring import load_run
from tasks_lib.storage import Storage
from tasks_lib.tracks.base import find_card, kit_for

SCRATCH = "workspace"
"""A research cell's scratch folder below its run: never exported (scoring never reads it)."""
PUBLISHED = ("pool", "subset")
"""Ledger kinds of published pool versions."""


class Selection(NamedTuple):
    """What one export covers: the runs, and the pool versions (their ledger rows and roots)."""

    scope: str
    runs: list[RunRecord]
    pools: dict[tuple[str, int], tuple[PoolRow | None, str]]


def _published(pool_id: str, version: int | None = None) -> PoolRow:
    rows = [r for r in store.pools(pool_id=pool_id) if r.kind in PUBLISHED
            and (version is None or r.version == version)]
    if not rows:
        known = sorted({r.pool_id for r in store.pools() if r.kind in PUBLISHED})
        which = f"{pool_id} v{version}" if version else pool_id
        raise InputDataError("--pool", f"no published pool {which} in the ledger (known: "
                                       f"{', '.join(known) or 'none'})")
    return max(rows, key=lambda r: r.version)


def _root(row: PoolRow) -> str:
    return row.manifest_url.removesuffix(f"/{MANIFEST}")


def parse_pool(ref: str) -> PoolRow:
    """``POOL`` (newest published version) or ``POOL@vN``; the version's ledger row."""
    pool_id, sep, number = ref.rpartition("@v")
    if sep and number.isdigit():
        return _published(pool_id, int(number))
    return _published(ref)


def _scored(rows: list[RunRow]) -> list[str]:
    ids = [r.run_id for r in rows]
    with_scores = {s.run_id for s in store.scores_for(ids)} if ids else set()
    return [i for i in ids if i in with_scores]


def select(run_ids: list[str] | None = None, pool: str | None = None,
           report: str | None = None) -> Selection:
    """The runs and pool versions of ``--run``, ``--pool`` or ``--report`` (exactly one).

    ``report``: a pool id (its newest version's scored runs, as ``report --pool`` ranks them)
    or a task id (its scored runs on any pool, as ``report --task``).
    """
    if sum(bool(x) for x in (run_ids, pool, report)) != 1:
        raise InputDataError("export", "give exactly one of --run, --pool and --report")
    rows: dict[tuple[str, int], tuple[PoolRow | None, str]] = {}
    if pool:
        row = parse_pool(pool)
        rows[row.pool_id, row.version] = (row, _root(row))
        ids = [r.run_id for r in store.runs(pool_id=row.pool_id, pool_version=row.version)]
        scope = f"pool {row.pool_id}@v{row.version}"
    elif report:
        if any(r.kind in PUBLISHED for r in store.pools(pool_id=report)):
            row = _published(report)
            ids = _scored(store.runs(pool_id=row.pool_id, pool_version=row.version))
        else:
            ids = _scored(store.runs(task_id=report))
        if not ids:
            raise InputDataError("--report", f"no scored run of pool or task {report!r} in the "
                                             "ledger (see: medflows runs list)")
        scope = f"report {report}"
    else:
        ids = list(dict.fromkeys(run_ids or []))
        scope = f"run {','.join(ids)}"
    runs = [load_run(i) for i in sorted(ids)]
    for run in runs:
        key = (run.pool_id, run.pool_version)
        if key not in rows:
            found = [r for r in store.pools(pool_id=run.pool_id, version=run.pool_version)
                     if r.kind in PUBLISHED]
            rows[key] = (found[0] if found else None, run.pool_url)
    return Selection(scope, runs, rows)


def _files(root: Storage, skip: tuple[str, ...] = ()) -> list[tuple[str, str, int]]:
    """``(key, path, size)`` of every file below ``root`` (keys under ``skip`` left out).

    Raises:
        InputDataError: a link or special file (named).
    """
    if not root.fs.exists(root.root_path):
        return []
    found = root.fs.find(root.root_path, detail=True)
    out = []
    for path, info in sorted(found.items()):
        key = posixpath.relpath(str(path), root.root_path)
        if key.startswith(skip):
            continue
        if info.get("islink") or info.get("type") != "file":
            # An agent's symlink (scored invalid) would travel as its target's bytes: refused.
            raise InputDataError(root.url(key), "not a regular file (a link or special file): "
                                                "a capsule carries regular files only")
        out.append((key, str(path), int(info["size"])))
    return out


def _add_tree(writer: CapsuleWriter, root: Storage, prefix: str,
              skip: tuple[str, ...] = ()) -> None:
    for key, path, size in _files(root, skip):
        writer.add_file(f"{prefix}/{key}", root.fs, path, size)


def _add_pool(writer: CapsuleWriter, key: tuple[str, int], row: PoolRow | None, url: str,
              with_files: bool) -> PoolEntry:
    root = Storage(url)
    if not root.exists(MANIFEST):
        raise InputDataError(root.url(MANIFEST), "the pool these runs used is gone; rebuild "
                                                 "it (medflows pool build …) to export them")
    header = root.read_json(MANIFEST)
    prefix = f"pools/{key[0]}/v{key[1]}"
    if with_files and root.exists(SUBSET_JSON):
        raise InputDataError(root.url(SUBSET_JSON), "a rotation subset's files name its parent "
                                                    "pools by location: export without "
                                                    "--with-pool-files (the importer holds "
                                                    "the pool), or export runs on the parent")
    if with_files:
        _add_tree(writer, root, prefix)
    else:
        writer.add_bytes(f"{prefix}/{MANIFEST}", root.read_bytes(MANIFEST))
    return PoolEntry(pool_id=key[0], version=key[1], content_hash=str(header["content_hash"]),
                     track=str(header.get("track") or (row.track if row else "")),
                     files=with_files)


def judgement_keys(run: RunRecord) -> list[str]:
    """Keys of the stage judgements (``judges/<key>.json``) scoring ``run`` reads: a research
    cell of a kit with a stage rubric, judged by the run's judge model."""
    kit = kit_for(run.track)
    if not run.has_trace or kit.stage_rubric is None:
        return []
    from evaluators.judges import stages
    from tasks_lib.harness.judging import JUDGED, trace_digest
    from tasks_lib.harness.rescore import judge_model
    from tasks_lib.harness.trace import load_trace

    trace = load_trace(run_store(run.run_id).child(TRACE))
    digest = hashlib.sha256(trace_digest(trace.messages, trace.plan).encode()).hexdigest()
    rubric = stages.load_rubric(kit.stage_rubric)
    return [stages.cache_key(rubric.version, digest, judge_model(run), f"{s}:{run.tier.value}")
            for s in JUDGED]


def _add_run(writer: CapsuleWriter, run: RunRecord) -> tuple[RunEntry, list[str]]:
    """The run's folder; its entry and the keys of the call-cache replies and judgements its
    re-execution and re-scoring read (``llm-cache/…``, ``judges/…`` members)."""
    folder = run_store(run.run_id)
    _add_tree(writer, folder, f"runs/{run.run_id}", skip=(f"{SCRATCH}/",))
    versions = {str(folder.read_json(name)["evaluator_version"]): f"runs/{run.run_id}/{name}"
                for name in folder.list("scores") if name.endswith(".json")}
    calls = read_journal(folder)
    entry = RunEntry(run_id=run.run_id, agent_id=run.agent.agent_id, task_id=run.task_id,
                     track=run.track, pool_id=run.pool_id, pool_version=run.pool_version,
                     score_cards=versions, call_keys=len(calls))
    return entry, [*(cache_path(k) for k in calls),
                   *(f"judges/{k}.json" for k in judgement_keys(run))]


def _cards(selection: Selection) -> list[str]:
    """Task ids of the cards the capsule carries: those its pool versions serve (the header's
    ``cards``; a manifest older than that field: its ``task_id``)."""
    ids: set[str] = set()
    for _, url in selection.pools.values():
        header = Storage(url).read_json(MANIFEST)
        ids.update(str(c) for c in header.get("cards") or [])
        if isinstance(header.get("task_id"), str):
            ids.add(header["task_id"])
    return sorted(ids)


def _medflows_version() -> str:
    try:
        return version("medflows")
    except PackageNotFoundError:
        return "unknown"


def export_capsule(out: Path, selection: Selection, with_pool_files: bool) -> CapsuleManifest:
    """Write the capsule of ``selection`` to ``out`` (tar, tar.gz or zip by its name)."""
    writer = CapsuleWriter(out)
    home = Storage.from_settings()
    pools = [_add_pool(writer, key, row, url, with_pool_files)
             for key, (row, url) in sorted(selection.pools.items())]
    entries, wanted = [], set()
    for run in selection.runs:
        entry, keys = _add_run(writer, run)
        entries.append(entry)
        wanted.update(keys)
    present = sorted(k for k in wanted if home.exists(k))
    for key in present:
        writer.add_file(key, home.fs, home.path(key), int(home.fs.size(home.path(key))))
    calls = [k for k in wanted if k.startswith(f"{CACHE_PREFIX}/")]
    added = sum(k.startswith(f"{CACHE_PREFIX}/") for k in present)
    cards = _cards(selection)
    for task_id in cards:
        writer.add_bytes(f"cards/{task_id}.json", find_card(task_id).model_dump_json(
            indent=2).encode())
    ids = [r.run_id for r in selection.runs]
    ledger: dict[str, list[PoolRow] | list[RunRow] | list[ScoreRow]] = {
        "pools": [row for row, _ in selection.pools.values() if row is not None],
        "runs": [row for i in ids for row in store.runs(run_id=i)],
        "scores": store.scores_for(ids) if ids else [],
    }
    for name, rows in ledger.items():
        writer.add_bytes(f"ledger/{name}.jsonl", jsonl_bytes(r.model_dump(mode="json")
                                                             for r in rows))
    tracks = sorted({p.track for p in pools} | {r.track.value for r in selection.runs})
    manifest = CapsuleManifest(
        format=FORMAT, created_at=datetime.now(UTC), medflows_version=_medflows_version(),
        scope=selection.scope, private=with_pool_files, cards=cards, pools=pools, runs=entries,
        evaluator_versions={t: kit_for(t).evaluator_version for t in tracks},
        call_cache_entries=added, call_cache_missing=len(calls) - added, members={})
    return writer.close(manifest)
