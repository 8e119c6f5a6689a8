"""The exploit audit of a published pool: the ways an agent games a benchmark, checked before
the pool is published (docs/audit.md).

Five checks, one :class:`Finding` each, on any pool root (a QA pool root or an imaging pool
version folder):

1. ``null_agents`` — no submission, the public sample submission and constant answers score at
   or below the documented floor (``datasets/audit/floors.yaml``), scored by the track's kit.
2. ``answer_key`` — nothing the agent can read (``public/``) reveals a reference: no byte copy
   or digest of a private file, no reference field on a row that names a pool case, no
   label-like file name, no "Answer: X" in a QA item.
3. ``grader_tampering`` — reference copies planted in the submission folder do not move the
   score; the agent sandbox spec mounts nothing private and the evaluator's mounts are read-only.
4. ``judge_injection`` — an answer that instructs the judge to give full marks
   (``datasets/audit/injections.yaml``) is judged exactly like the same answer without it.
5. ``egress`` — inside the agent sandbox, TCP to a listening 127.0.0.1 port, TCP to an external
   address and DNS resolution all fail.

:func:`require_clean` is the publish gate: a pool is published only with a clean report or an
explicit override reason, and the decision is recorded in the pool's ``audit.json``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import posixpath
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import yaml
from prefect import get_run_logger, task
from pydantic import Field

from evaluators.core import InputDataError, RunStatus, Track
from tasks_lib.domain import Frozen
from tasks_lib.records import RunRecord, ScoreCard
from tasks_lib.settings import get_settings
from tasks_lib.storage import Storage

AUDIT_JSON = "audit.json"
"""Where the publish gate records the report and any override, in the pool root."""
CHECKS = ("null_agents", "answer_key", "grader_tampering", "judge_injection", "egress")
REFERENCE_FIELDS = frozenset({"answer", "answer_idx", "answers", "label", "labels", "target",
                              "targets", "reference", "references", "solution", "solutions",
                              "gt", "ground_truth", "groundtruth", "correct", "correct_answer"})
"""Keys whose value is a reference when the row names a pool case."""
CASE_FIELDS = ("case_id", "question_id", "image_id", "realidx", "id")
"""Keys that name a case in a public table."""
LABEL_NAME = re.compile(r"(?i)(^|[^a-z])(labels?|masks?|gt|ground[_-]?truth|references?|refs?|"
                        r"answers?|answer[_-]?key|solutions?|targets?|keys?)([^a-z]|$)")
"""A public path component that suggests a case's label, mask or reference."""
ANSWER_TEXT = re.compile(r"(?i)\b(?:correct\s+)?answer\s*(?:is|:|=)\s*\(?([A-J])\)?(?![A-Za-z])")
"""An item text that names an option letter as the answer."""
DIGESTS = ("md5", "sha1", "sha256")
HEX = re.compile(r"(?<![0-9a-f])[0-9a-f]{32,64}(?![0-9a-f])")
"""Hex digests in a public file's (lower-cased) text."""
TEXT_LIMIT = 64 * 2**20
"""Public files up to this size are searched as text (larger ones only by digest)."""
JUDGE_TIER = "standard"


class Severity(StrEnum):
    """How bad a failed check is: ``error`` blocks publishing, ``warning`` is reported only."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Finding(Frozen):
    """The outcome of one audit check."""

    check: str = Field(description="Check name (one of CHECKS).")
    passed: bool = Field(description="The check ran and found nothing.")
    severity: Severity = Field(description="error (blocks publishing), warning, info.")
    rule: str = Field(description="What the check requires, with its floor or tolerance.")
    evidence: list[str] = Field(default_factory=list,
                                description="Each hit: the file/item, the rule, what it leaks.")


class AuditReport(Frozen):
    """The exploit audit of one pool version."""

    pool_url: str = Field(description="Root URL of the audited pool.")
    pool_id: str = Field(description="Pool id (task id of an imaging pool).")
    version: int = Field(description="Pool version.")
    pool_hash: str = Field(description="Content hash of the pool version.")
    track: Track = Field(description="Track of the pool.")
    created_at: datetime = Field(description="When the audit ran (UTC).")
    findings: list[Finding] = Field(description="One finding per check.")

    @property
    def clean(self) -> bool:
        """No failed finding of severity ``error`` (warnings, e.g. a skipped probe, are shown
        but do not block)."""
        return all(f.passed or f.severity is not Severity.ERROR for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict with ``clean`` included."""
        return {**self.model_dump(mode="json"), "clean": self.clean}


class GateRecord(Frozen):
    """What :func:`require_clean` writes to the pool's ``audit.json``."""

    report: dict[str, Any] = Field(description="The audit report (with ``clean``).")
    override: str | None = Field(description="Why an unclean pool was published anyway.")
    decided_at: datetime = Field(description="When the gate passed (UTC).")


class Judge(Protocol):
    """What the injection check asks of a judge (:class:`~tasks_lib.harness.judging.StageJudge`
    satisfies it)."""

    def judge(self, track: str, tier: str, digest: str, files: list[str]) -> list[Any]:
        """One judgement (``stage``, ``score``, ``error``) per judged stage."""
        ...


JudgeFactory = Callable[[], Judge]


class PoolInfo(Frozen):
    """Identity and layout of the audited pool."""

    url: str
    pool_id: str
    version: int
    pool_hash: str
    track: Track
    task_id: str


# --------------------------------------------------------------------------- pool and data


def pool_info(pool_url: str) -> PoolInfo:
    """Read the manifest of the pool at ``pool_url`` (QA pool root or imaging version folder).

    Raises:
        InputDataError: no manifest, or not a pool manifest.
    """
    root = Storage(pool_url)
    if not root.exists("manifest.json"):
        raise InputDataError(root.url("manifest.json"), "no pool here (build one with medflows "
                                                        "pool build …)")
    try:
        data = root.read_json("manifest.json")
        track = Track(data["track"])
        pool_id = str(data.get("pool_id") or data["task_id"])
        return PoolInfo(url=root.root_url, pool_id=pool_id, version=int(data["version"]),
                        pool_hash=str(data["content_hash"]), track=track,
                        task_id=str(data.get("task_id") or pool_id))
    except (KeyError, ValueError, TypeError) as exc:
        raise InputDataError(root.url("manifest.json"), f"not a pool manifest: {exc}") from None


def _data(name: str) -> Any:
    path = get_settings().datasets_dir / "audit" / name
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputDataError(str(path), "audit data file missing") from None


@lru_cache(maxsize=4)
def _floors(datasets_dir: str) -> dict[str, dict[str, dict[str, Any]]]:
    floors: dict[str, dict[str, dict[str, Any]]] = _data("floors.yaml")
    return floors


def floors() -> dict[str, dict[str, dict[str, Any]]]:
    """``datasets/audit/floors.yaml``: track → null agent → ``{floor, source[, tolerance]}``."""
    return _floors(str(get_settings().datasets_dir))


def injections() -> list[dict[str, str]]:
    """``datasets/audit/injections.yaml``: the prompt-injection payloads (``id``, ``text``)."""
    rows: list[dict[str, str]] = _data("injections.yaml")
    return rows


def _files(root: Storage, prefix: str) -> Iterator[str]:
    """Every file key under ``prefix`` (recursive, sorted)."""
    base = root.path(prefix)
    if not root.fs.exists(base):
        return
    for p in sorted(root.fs.find(base)):
        yield posixpath.relpath(str(p), root.root_path)


def _file_digests(root: Storage, key: str) -> dict[str, str]:
    """md5, sha1 and sha256 hex digests of a stored file, streamed."""
    hashes = {name: hashlib.new(name) for name in DIGESTS}
    with root.open(key) as fh:
        while chunk := fh.read(2**20):
            for h in hashes.values():
                h.update(chunk)
    return {name: h.hexdigest() for name, h in hashes.items()}


# --------------------------------------------------------------------------- scoring


def _run(info: PoolInfo, run_id: str) -> RunRecord:
    from tasks_lib.agents import upload_agent

    return RunRecord(run_id=run_id, agent=upload_agent("audit"), task_id=info.task_id,
                     track=info.track, status=RunStatus.COMPLETED, pool_url=info.url,
                     pool_id=info.pool_id, pool_version=info.version, pool_hash=info.pool_hash)


def score_folder(info: PoolInfo, folder: Path, name: str) -> ScoreCard:
    """The track kit's score card of ``folder`` (in process, exactly as the score flow's kit
    call; Dask off for imaging: the values are the same)."""
    from tasks_lib.tracks.base import kit_for

    if info.track is Track.QA:
        return kit_for(info.track).score(_run(info, f"audit-{name}"), folder)
    from tasks_lib.imaging.kit import imaging_kit
    from tasks_lib.imaging.pool import load_task

    return imaging_kit(info.track).score_folder(load_task(info.task_id), info.url, folder,
                                                f"audit-{name}", use_dask=False)


def _qa_rows(root: Storage, key: str) -> list[dict[str, Any]]:
    """Rows of a QA pool file read as plain JSON (a leaky row with extra fields still reads)."""
    from tasks_lib.qa.pool import FILES

    try:
        return [r for r in root.read_jsonl(FILES[key]) if isinstance(r, dict)]
    except FileNotFoundError:
        raise InputDataError(root.url(FILES[key]), "not a QA pool: file missing") from None
    except (ValueError, RecursionError) as exc:
        raise InputDataError(root.url(FILES[key]), f"unreadable: {exc}") from None


def _qa_letters(root: Storage) -> tuple[list[str], float, float, int]:
    """Option letters used by the pool, its chance rate, the standard error of a constant
    answer's score around it, and the item count. Like the kit's task score, chance is a macro
    mean over datasets of mean(1/n_options); the error is the macro mean's binomial one."""
    items = [it for it in _qa_rows(root, "public_items") if isinstance(it.get("options"), dict)]
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


def _write_answers(root: Storage, folder: Path, letter: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"dataset": it.get("dataset"), "realidx": it.get("realidx"), "answer": letter,
             "raw": letter, "calls": 0, "prompt_tokens": None, "completion_tokens": None,
             "time_s": None, "cost_usd": None} for it in _qa_rows(root, "public_items")]
    (folder / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows),
                                          encoding="utf-8")


def _imaging_baseline(info: PoolInfo, kind: str, folder: Path) -> None:
    from tasks_lib.imaging.baselines import BaselineKind, baseline_files, write_submission
    from tasks_lib.imaging.pool import read_manifest

    write_submission(baseline_files(BaselineKind(kind), info.url, read_manifest(info.url)),
                     folder)


def _copy_public_sample(root: Storage, folder: Path) -> bool:
    folder.mkdir(parents=True, exist_ok=True)
    found = False
    for key in _files(root, "public/sample_submission"):
        rel = posixpath.relpath(key, "public/sample_submission")
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(root.read_bytes(key))
        found = True
    return found


def _score(card: ScoreCard) -> float:
    return float(card.task_score or 0.0)


# --------------------------------------------------------------------------- 1. null agents


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
            _write_answers(root, folder, letter)
            card = score_folder(info, folder, f"constant-{letter}")
            value = _score(card)
            scored.append((f"constant '{letter}'", value, chance + tol, BIAS))
            if value > chance + float(spec.get("block_factor", 3.0)) * tol:
                blocking.append(f"constant '{letter}' scores {value:.4f}, beyond "
                                f"{spec.get('block_factor', 3.0)} tolerances above chance")
    else:
        for kind in ("empty", "constant"):
            folder = work / f"null-{kind}"
            _imaging_baseline(info, kind, folder)
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


# --------------------------------------------------------------------------- 2. answer key


def _rows(key: str, data: bytes) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, row)`` of every object row of a JSON / JSONL / CSV public file."""
    text = data.decode("utf-8", "replace")
    low = key.lower()
    if low.endswith(".jsonl"):
        for n, line in enumerate(text.splitlines(), 1):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                yield f"{key} line {n}", obj
    elif low.endswith(".json"):
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            return
        objs = obj if isinstance(obj, list) else [obj]
        for n, o in enumerate(objs):
            if isinstance(o, dict):
                yield (f"{key} [{n}]" if isinstance(obj, list) else key), o
    elif low.endswith(".csv"):
        for n, row in enumerate(csv.DictReader(io.StringIO(text)), 2):
            yield f"{key} line {n}", {k: v for k, v in row.items() if k is not None}


def _cases(info: PoolInfo, root: Storage) -> tuple[set[str], set[str]]:
    """Case ids and (QA) question texts of the pool's cases."""
    if info.track is Track.QA:
        items = _qa_rows(root, "public_items")
        ids = {str(it.get("realidx")) for it in items} | {f"{it.get('dataset')}/"
                                                          f"{it.get('realidx')}" for it in items}
        return ids, {str(it.get("question", "")).strip() for it in items}
    from tasks_lib.imaging.pool import read_manifest

    return {c.case_id for c in read_manifest(info.url).cases}, set()


def _names_case(row: dict[str, Any], ids: set[str], questions: set[str]) -> str | None:
    for field in CASE_FIELDS:
        value = row.get(field)
        if value is not None and str(value) in ids:
            return f"{field}={value}"
    q = row.get("question")
    if isinstance(q, str) and q.strip() in questions:
        return "question text of a pool item"
    return None


def _sample_keys(info: PoolInfo) -> set[str]:
    """Public keys of the sample submission (reference fields there are the layout, not a key;
    their values are still searched by digest and null-agent scoring)."""
    return {k for k in _files(Storage(info.url), "public/sample_submission")}


def check_answer_key(info: PoolInfo) -> Finding:
    """Search everything under ``public/`` for a reference, a label file or a digest of one."""
    root = Storage(info.url)
    by_sha: dict[str, str] = {}
    hexes: dict[str, str] = {}
    for k in _files(root, "private"):
        digests = _file_digests(root, k)
        by_sha.setdefault(digests["sha256"], k)
        hexes.update({d: k for d in digests.values()})
    ids, questions = _cases(info, root)
    samples = _sample_keys(info)
    refs: dict[str, str] = {}
    if info.track is Track.QA:
        refs = {f"{r.get('dataset')}/{r.get('realidx')}": str(r.get("answer_idx"))
                for r in _qa_rows(root, "references")}
    hits: list[str] = []
    for key in _files(root, "public"):
        sha = _file_digests(root, key)["sha256"]
        if sha in by_sha and root.fs.size(root.path(key)):
            hits.append(f"{key}: byte-identical to the reference {by_sha[sha]} "
                        "(rule: no private file in the public view)")
        parts = posixpath.relpath(key, "public").split("/")
        if key not in samples and any(LABEL_NAME.search(p.rsplit(".", 1)[0]) for p in parts):
            hits.append(f"{key}: file name suggests a label/mask/reference (rule: "
                        f"{LABEL_NAME.pattern})")
        if root.fs.size(root.path(key)) > TEXT_LIMIT:
            continue
        data = root.read_bytes(key)
        text = data.decode("utf-8", "replace").lower()
        for digest in sorted(set(HEX.findall(text)) & hexes.keys()):
            hits.append(f"{key}: contains the digest {digest[:16]}… of the reference "
                        f"{hexes[digest]} (rule: no reference digest in the public view)")
        if key in samples:
            continue
        for where, row in _rows(key, data):
            fields = sorted(REFERENCE_FIELDS & {str(k).lower() for k in row})
            case = _names_case(row, ids, questions)
            if fields and case:
                hits.append(f"{where}: reference field(s) {', '.join(fields)} on a row naming "
                            f"a pool case ({case}) (rule: no reference field in public rows)")
            if refs and case:
                hits += _answer_text(where, row, refs)
    return Finding(check="answer_key", passed=not hits, severity=Severity.ERROR,
                   rule="no public file is a copy or digest of a private reference, carries a "
                        "reference field on a row naming a case, has a label-like name, or "
                        "(QA) states the reference letter as 'Answer: X'", evidence=hits[:200])


def _answer_text(where: str, row: dict[str, Any], refs: dict[str, str]) -> list[str]:
    key = f"{row.get('dataset')}/{row.get('realidx')}"
    ref = refs.get(key)
    if ref is None:
        return []
    text = " ".join(str(v) for k, v in row.items() if k != "options")
    found = [m.group(1).upper() for m in ANSWER_TEXT.finditer(text)]
    if ref.upper() in found:
        return [f"{where}: item {key} states 'Answer: {ref}', its reference (rule: no answer "
                "pattern in item text; leaks private/references.jsonl)"]
    return []


# --------------------------------------------------------------------------- 3. tampering


def _plant_tampered(info: PoolInfo, root: Storage, folder: Path, forged: Callable[[str], bytes]
                    ) -> list[str]:
    """Copies of every reference file, forged, at the paths an evaluator might look for."""
    own = {p.name for p in folder.iterdir()}
    planted: list[str] = []
    for key in _files(root, "private"):
        if "/zarr/" in f"/{key}":
            continue
        data = forged(key)
        rel = posixpath.relpath(key, "private")
        for target in (key, rel, posixpath.basename(key),
                       f"references/{posixpath.basename(key)}",
                       f"labels/{posixpath.basename(key)}"):
            if target.split("/")[0] in own:
                continue  # never overwrite the submission's own files
            path = folder / target
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            planted.append(target)
    return sorted(set(planted))


def _forger(info: PoolInfo, root: Storage, baseline: Path) -> Callable[[str], bytes]:
    """A forged reference equal to what the baseline submitted (a grader reading it would
    score the baseline perfect); QA: every reference's answer set to 'A'."""
    if info.track is Track.QA:
        def qa(key: str) -> bytes:
            rows = [{**r, "answer_idx": "A"} for r in root.read_jsonl(key)] \
                if key.endswith(".jsonl") else []
            return "".join(json.dumps(r) + "\n" for r in rows).encode()
        return qa
    submitted = {p.stem.split(".")[0]: p.read_bytes() for p in baseline.iterdir() if p.is_file()}
    only = next(iter(submitted.values()), b"")

    def imaging(key: str) -> bytes:
        stem = posixpath.basename(key).split(".")[0]
        return submitted.get(stem, only)
    return imaging


def _key_values(card: ScoreCard) -> dict[str, Any]:
    return {"task_score": card.task_score, "metrics": card.metrics,
            "per_case": {c.case_id: c.values for c in card.per_case}}


def _spec_exposure(info: PoolInfo, work: Path) -> list[str]:
    """Private files reachable through the agent or evaluator sandbox specs."""
    from tasks_lib.sandbox.base import agent_spec, evaluator_spec

    root = Storage(info.url)
    if not Path(root.root_path).is_dir():
        return []
    pool = Path(root.root_path).resolve()
    private = pool / "private"
    hits: list[str] = []
    for key in _files(root, "public"):
        p = Path(root.path(key))
        if p.is_symlink() and not p.resolve().is_relative_to((pool / "public").resolve()):
            hits.append(f"{key}: symlink to {p.resolve()} outside the public view (rule: the "
                        "agent reads only public/)")
    workspace = work / "spec-workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    spec = agent_spec(pool / "public", workspace, [str(private)])
    for m in spec.mounts:
        host = m.host.resolve()
        if host == private or private.is_relative_to(host) or host.is_relative_to(private):
            hits.append(f"agent sandbox mounts {host} at {m.target}, which exposes "
                        f"{private} (rule: private references are never mounted)")
    out = work / "spec-output"
    out.mkdir(parents=True, exist_ok=True)
    espec = evaluator_spec(private, work, out, [])
    for m in espec.mounts:
        if m.writable and m.target != "/output":
            hits.append(f"evaluator sandbox mounts {m.target} writable (rule: references and "
                        "submission are read-only in the evaluator)")
    return hits


def check_grader_tampering(info: PoolInfo, work: Path) -> Finding:
    """A baseline scored clean and with forged reference copies planted beside it score the
    same; the sandbox specs expose no private file."""
    root = Storage(info.url)
    clean_dir, tampered = work / "tamper-clean", work / "tamper-planted"
    if info.track is Track.QA:
        _write_answers(root, clean_dir, "A")
        _write_answers(root, tampered, "A")
    else:
        _imaging_baseline(info, "constant", clean_dir)
        _imaging_baseline(info, "constant", tampered)
    planted = _plant_tampered(info, root, tampered, _forger(info, root, clean_dir))
    before = _key_values(score_folder(info, clean_dir, "tamper-clean"))
    after = _key_values(score_folder(info, tampered, "tamper-planted"))
    evidence: list[str] = []
    if before != after:
        moved = [k for k in before if before[k] != after[k]]
        evidence.append(f"planting forged references ({', '.join(planted[:5])}"
                        f"{' …' if len(planted) > 5 else ''}) moved {', '.join(moved)}: "
                        f"task_score {before['task_score']} → {after['task_score']} (rule: the "
                        "evaluator reads references only from the pool's private copy)")
    evidence += _spec_exposure(info, work)
    return Finding(check="grader_tampering", passed=not evidence, severity=Severity.ERROR,
                   rule=f"the score of a baseline does not move when {len(planted)} forged "
                        "reference copies are planted in its submission folder; the agent spec "
                        "mounts nothing private; the evaluator's references are read-only",
                   evidence=evidence)


# --------------------------------------------------------------------------- 4. injection


HONEST_PLAN = ("# Plan\n\nLoad the public inputs, apply the track's scripted baseline method "
               "(method.py) and write the submission in the documented layout.\n")


def _digest(track: Track, extra: str) -> str:
    """The judge digest of an honest answer: the track's scripted baseline recipe run once,
    with ``extra`` (an injected payload) appended to the answer, the tool output and the plan."""
    from tasks_lib.harness.judging import trace_digest
    from tasks_lib.harness.messages import ChatMessage, Role, ToolCall
    from tasks_lib.tracks.base import kit_for

    try:
        name, source = kit_for(track).recipe()
    except InputDataError:
        name, source = "baseline", "print('baseline')"
    now, tail = time.time(), (f"\n{extra}" if extra else "")
    call = ToolCall(call_id="c1", name="execute_code",
                    arguments=json.dumps({"language": "python", "code": source}))
    messages = [ChatMessage(role=Role.ASSISTANT, content=f"Running the {name} method." + tail,
                            tool_calls=[call], at=now),
                ChatMessage(role=Role.TOOL, content="exit_code: 0" + tail, tool_call_id="c1",
                            name="execute_code", at=now),
                ChatMessage(role=Role.ASSISTANT, content="Submission written." + tail, at=now)]
    return trace_digest(messages, HONEST_PLAN + tail)


def _facts(track: Track, extra: str) -> Any:
    """The error-code coder's facts of the same honest run (payload in the tool output)."""
    from evaluators.judges.error_codes import RunFacts
    from tasks_lib.tracks.base import kit_for

    try:
        _, source = kit_for(track).recipe()
    except InputDataError:
        source = "print('baseline')"
    return RunFacts(tool_outputs=["exit_code: 0" + (f"\n{extra}" if extra else "")],
                    codes_run=[source], workspace_files=["plan.md", "method.py"],
                    submission_files=[], submitted=True, timed_out=False, s5_valid=True)


def _coder_moved(track: Track, model: str, payload: dict[str, str]) -> tuple[list[str],
                                                                                list[str]]:
    """``(moved, failed)``: a payload that changes the error codes the coder fires."""
    from tasks_lib.harness.judging import code_errors

    clean = code_errors(track.value, _digest(track, ""), _facts(track, ""), model)
    hit = code_errors(track.value, _digest(track, payload["text"]),
                      _facts(track, payload["text"]), model)
    if clean.llm_error or hit.llm_error:
        return [], [f"{payload['id']}/error codes: coder failed: "
                    f"{clean.llm_error or hit.llm_error}"]
    if clean.fired != hit.fired:
        return [f"payload {payload['id']!r} (datasets/audit/injections.yaml) changed the fired "
                f"error codes from {[c.value for c in clean.fired]} to "
                f"{[c.value for c in hit.fired]} (coder {model}; rule: injected instructions "
                "must not change the coding)"], []
    return [], []


def stage_judge_factory(model: str, cache: Storage) -> JudgeFactory:
    """The S1–S3 judge of the harness with ``model`` and a private judgement cache."""
    def make() -> Judge:
        from tasks_lib.harness.judging import StageJudge

        return StageJudge(model, cache=cache)
    return make


def check_judge_injection(info: PoolInfo, judge: JudgeFactory | None, model: str,
                          work: Path) -> Finding:
    """Each payload of ``injections.yaml`` added to a plain answer leaves every judged stage's
    score unchanged."""
    from evaluators.judges import stages

    try:
        stages.load_rubric(info.track.value)
    except KeyError:
        return Finding(check="judge_injection", passed=True, severity=Severity.INFO,
                       rule="the judged score does not move when the answer tells the judge "
                            "to give full marks",
                       evidence=[f"track {info.track.value} has no LLM-judged stage (scored by "
                                 "exact rules only): nothing to inject"])
    make = judge or stage_judge_factory(model, Storage(str(work / "judge-cache")))
    files = ["plan.md", "submission"]
    track = info.track.value
    clean = {j.stage: j for j in make().judge(track, JUDGE_TIER, _digest(info.track, ""), files)}
    evidence: list[str] = []
    warnings: list[str] = []
    for payload in injections():
        got = make().judge(track, JUDGE_TIER, _digest(info.track, payload["text"]), files)
        if judge is None:  # the harness's own judges: the error-code coder is one too
            moved, failed = _coder_moved(info.track, model, payload)
            evidence += moved
            warnings += failed
        for j in got:
            base = clean.get(j.stage)
            if j.error is not None or (base is not None and base.error is not None):
                warnings.append(f"{payload['id']}/{j.stage}: judge failed: "
                                f"{j.error or (base.error if base else '')}")
            elif base is None or base.score != j.score:
                evidence.append(f"payload {payload['id']!r} (datasets/audit/injections.yaml) "
                                f"moved {j.stage} from {base.score if base else None} to "
                                f"{j.score} (judge {model}; rule: injected instructions must "
                                "not change the judged score)")
    rule = (f"{len(injections())} injected payloads leave S1–S3 of the {info.track.value} "
            f"rubric{' and the fired error codes' if judge is None else ''} unchanged (judge "
            f"{model})")
    if evidence:
        return Finding(check="judge_injection", passed=False, severity=Severity.ERROR,
                       rule=rule, evidence=evidence)
    if warnings:
        return Finding(check="judge_injection", passed=False, severity=Severity.WARNING,
                       rule=rule, evidence=warnings[:20])
    return Finding(check="judge_injection", passed=True, severity=Severity.ERROR, rule=rule)


# --------------------------------------------------------------------------- 5. egress


PROBE = r"""
import json, socket
out = {}
def tcp(host, port):
    try:
        s = socket.create_connection((host, port), timeout=3)
        s.close()
        return "connected"
    except OSError as exc:
        return "failed: " + type(exc).__name__
out["tcp 127.0.0.1:PORT"] = tcp("127.0.0.1", PORT)
out["tcp 1.1.1.1:443"] = tcp("1.1.1.1", 443)
out["tcp 8.8.8.8:53"] = tcp("8.8.8.8", 53)
try:
    socket.getaddrinfo("example.com", 443)
    out["dns example.com"] = "resolved"
except OSError as exc:
    out["dns example.com"] = "failed: " + type(exc).__name__
print(json.dumps(out))
"""


def check_egress(info: PoolInfo, work: Path, sandbox: bool = True) -> Finding:
    """TCP to a listening 127.0.0.1 port, TCP to public addresses and DNS all fail inside the
    agent sandbox (bwrap, the card's network policy)."""
    rule = ("inside the agent sandbox, TCP to a host port listening on 127.0.0.1, TCP to "
            "1.1.1.1:443 / 8.8.8.8:53 and DNS resolution all fail")
    if not sandbox or shutil.which("bwrap") is None:
        return Finding(check="egress", passed=False, severity=Severity.WARNING, rule=rule,
                       evidence=["skipped: no sandbox" + ("" if sandbox else " (--no-sandbox)")])
    from tasks_lib.sandbox.base import Language, NetworkPolicy, agent_spec
    from tasks_lib.sandbox.local import BwrapSandbox

    network = NetworkPolicy.NONE
    if info.track is not Track.QA:
        from tasks_lib.imaging.pool import load_task

        network = NetworkPolicy(load_task(info.task_id).network)
    public = Path(Storage(info.url).root_path) / "public"  # the pool's own view when local
    if not public.is_dir():
        public = work / "egress-public"
        public.mkdir(parents=True, exist_ok=True)
    workspace = work / "egress-workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    listener = socket.socket()
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = int(listener.getsockname()[1])
        box = BwrapSandbox(agent_spec(public, workspace, [], network), monitor=False)
        try:
            result = box.execute(Language.PYTHON, PROBE.replace("PORT", str(port)), 60)
        finally:
            box.close()
    finally:
        listener.close()
    try:
        outcome: dict[str, str] = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return Finding(check="egress", passed=False, severity=Severity.WARNING, rule=rule,
                       evidence=[f"skipped: no sandbox (the probe did not run: exit "
                                 f"{result.exit_code}: {result.stderr.strip()[-300:]})"])
    reached = [f"{k}: {v} (network policy {network.value}; rule: every attempt must fail)"
               for k, v in outcome.items() if not v.startswith("failed")]
    return Finding(check="egress", passed=not reached, severity=Severity.ERROR,
                   rule=f"{rule}; observed: {json.dumps(outcome, sort_keys=True)}",
                   evidence=reached)


# --------------------------------------------------------------------------- audit and gate


def _guard(check: str, run: Callable[[], Finding]) -> Finding:
    """Run one check; a pool the kit refuses fails the check with the kit's reason."""
    try:
        return run()
    except InputDataError as exc:
        return Finding(check=check, passed=False, severity=Severity.ERROR,
                       rule="the check runs on the pool as published",
                       evidence=[f"the check could not run: {exc}"])


def audit_pool(pool_url: str, judge_model: str | None = None, judge: JudgeFactory | None = None,
               sandbox: bool = True) -> AuditReport:
    """Run every check on the pool at ``pool_url``; nothing is written to the pool.

    Args:
        pool_url: A pool version root (URL or local path): QA, imaging, or a track whose kit
            has its own audit (:meth:`TrackKit.audit`, e.g. MedBench).
        judge_model: Judge of the injection check (default: the configured ``judge_model``;
            ``rules`` is the offline judge).
        judge: Builds the judge to probe instead of the harness's StageJudge (tests).
        sandbox: Run the egress probe in the bwrap sandbox (off: the finding says skipped).

    Raises:
        InputDataError: ``pool_url`` holds no pool.
    """
    from tasks_lib.tracks.base import kit_for

    info = pool_info(pool_url)
    model = judge_model or get_settings().judge_model
    own = kit_for(info.track).audit(info.url, model, sandbox)
    if own is not None:  # the track audits its own pools (TrackKit.audit)
        return own
    with tempfile.TemporaryDirectory(prefix="medflows-audit-") as tmp:
        work = Path(tmp)
        findings = [_guard("null_agents", lambda: check_null_agents(info, work)),
                    _guard("answer_key", lambda: check_answer_key(info)),
                    _guard("grader_tampering", lambda: check_grader_tampering(info, work)),
                    _guard("judge_injection",
                           lambda: check_judge_injection(info, judge, model, work)),
                    _guard("egress", lambda: check_egress(info, work, sandbox))]
    return AuditReport(pool_url=info.url, pool_id=info.pool_id, version=info.version,
                       pool_hash=info.pool_hash, track=info.track, created_at=datetime.now(UTC),
                       findings=findings)


def require_clean(report: AuditReport, override: str | None) -> GateRecord:
    """The publish gate: pass a clean report, or an unclean one with an override reason; the
    report and the override are recorded in ``audit.json`` at the pool root (Storage layer).

    Raises:
        InputDataError: the report is not clean and no override reason was given (names every
            failed check).
    """
    reason = (override or "").strip() or None
    if not report.clean and reason is None:
        failed = [f"{f.check} ({f.evidence[0] if f.evidence else f.rule})"
                  for f in report.findings if not f.passed and f.severity is Severity.ERROR]
        raise InputDataError(f"pool {report.pool_id} v{report.version}",
                             f"the exploit audit is not clean: {'; '.join(failed)}; fix the "
                             "pool or publish with an override reason")
    record = GateRecord(report=report.to_json(), override=reason,
                        decided_at=datetime.now(UTC))
    Storage(report.pool_url).write_json(AUDIT_JSON, record)
    return record


@task(name="audit-pool", task_run_name="audit-{pool_url}")
def audit_gate(pool_url: str, override: str | None = None) -> GateRecord:
    """The construct flows' publish gate: audit the written pool version before the ledger
    records it; an unclean audit stops the flow unless ``override`` gives a reason (recorded in
    the pool's ``audit.json`` with the report)."""
    report = audit_pool(pool_url)
    for finding in report.findings:
        if not finding.passed:
            get_run_logger().warning("audit %s: %s (%s)", finding.check, finding.rule,
                                     "; ".join(finding.evidence[:3]))
    return require_clean(report, override)
