"""Check 2 of the exploit audit, ``answer_key``: nothing the agent can read (``public/``)
reveals a reference: no byte copy or digest of a private file, no reference field on a row that
names a pool case, no label-like file name, no "Answer: X" in a QA item."""

from __future__ import annotations

import csv
import io
import json
import posixpath
import re
from collections.abc import Iterator
from typing import Any

from tasks_lib.audits.encoded import build_index, search_public
from tasks_lib.audits.pool import PoolInfo, file_digests, pool_files, read_capped
from tasks_lib.audits.report import Finding, Severity
from tasks_lib.storage import Storage

REFERENCE_FIELDS = frozenset({"answer", "answer_idx", "answers", "label", "labels", "target",
                              "targets", "reference", "references", "solution", "solutions",
                              "gt", "ground_truth", "groundtruth", "correct", "correct_answer"})
"""Keys whose value is a reference when the row names a pool case."""
CASE_FIELDS = ("case_id", "question_id", "image_id", "realidx", "id")
"""Keys that name a case in a public table."""
LABEL_NAME = re.compile(r"(?i)(^|[^a-z])(labels?|masks?|gt|ground[_-]?truth|references?|refs?|"
                        r"answers?|answer[_-]?key|solutions?|targets?|keys?)([^a-z]|$)")
"""A public path component that suggests a case's label, mask or reference."""
HEX = re.compile(rb"(?<![0-9a-fA-F])[0-9a-fA-F]{32,64}(?![0-9a-fA-F])")
"""Hex digests in a public file's bytes."""
TEXT_LIMIT = 64 * 2**20
"""Public files up to this size are searched as text (larger ones only by digest)."""


def _rows(key: str, data: bytes) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, row)`` of every object row of a JSON / JSONL / CSV public file."""
    low = key.lower()
    if not low.endswith((".jsonl", ".json", ".csv")):
        return
    text = data.decode("utf-8", "replace")
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


def _names_case(row: dict[str, Any], ids: frozenset[str], questions: frozenset[str]
                ) -> str | None:
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
    return {k for k in pool_files(Storage(info.url), "public/sample_submission")}


def _digest_hits(key: str, data: bytes, hexes: dict[str, str]) -> list[str]:
    """Digests of private files written in a public text file (binary files are searched by
    their decoded contents, not for digests)."""
    if b"\x00" in data[:65536]:
        return []
    found = {h.decode("ascii").lower() for h in HEX.findall(data)}
    return [f"{key}: contains the digest {digest[:16]}… of the reference {hexes[digest]} "
            "(rule: no reference digest in the public view)"
            for digest in sorted(found & hexes.keys())]


def check_answer_key(info: PoolInfo) -> Finding:
    """Search everything under ``public/`` for a reference, a label file or a digest of one."""
    from tasks_lib.tracks.base import kit_for

    known = kit_for(info.track).answer_key_data(info.url)
    root = Storage(info.url)
    by_sha: dict[str, str] = {}
    hexes: dict[str, str] = {}
    for k in pool_files(root, "private"):
        digests = file_digests(root, k)
        by_sha.setdefault(digests["sha256"], k)
        hexes.update({d: k for d in digests.values()})
    samples = _sample_keys(info)
    hits: list[str] = []
    for key in pool_files(root, "public"):
        sha = file_digests(root, key, ("sha256",))["sha256"]
        if sha in by_sha and root.fs.size(root.path(key)):
            hits.append(f"{key}: byte-identical to the reference {by_sha[sha]} "
                        "(rule: no private file in the public view)")
        parts = posixpath.relpath(key, "public").split("/")
        if key not in samples and not key.startswith(known.public_by_design) and any(
                LABEL_NAME.search(p.rsplit(".", 1)[0]) for p in parts):
            hits.append(f"{key}: file name suggests a label/mask/reference (rule: "
                        f"{LABEL_NAME.pattern})")
        data = read_capped(root, key, TEXT_LIMIT)
        if data is None:
            continue
        hits += _digest_hits(key, data, hexes)
        if key in samples:
            continue
        for where, row in _rows(key, data):
            fields = sorted(REFERENCE_FIELDS & {str(k).lower() for k in row})
            case = _names_case(row, known.case_ids, known.questions)
            if fields and case:
                hits.append(f"{where}: reference field(s) {', '.join(fields)} on a row naming "
                            f"a pool case ({case}) (rule: no reference field in public rows)")
    by_design = {k for k in pool_files(root, "public") if k.startswith(known.public_by_design)}
    hits += encoded_hits(root, samples | by_design, known.numbers or None) + known.leaks
    return Finding(check="answer_key", passed=not hits, severity=Severity.ERROR,
                   rule="no public file is a copy or digest of a private reference or holds "
                        "one in another encoding (compressed, archived, base64/hex, arrays, "
                        "slices of a stack, rows, text), carries a reference field on a row "
                        "naming a case, has a label-like name, is a symlink or special file, "
                        "or leaks a reference in a way the pool's kit names (e.g. an item "
                        "stating 'Answer: X', a mark singling out the gold option)"
                        + (f"; public by design (no name rule): "
                           f"{', '.join(known.public_by_design)}" if known.public_by_design
                           else ""), evidence=hits[:200])


def encoded_hits(root: Storage, samples: set[str], numbers: list[tuple[float, str]] | None = None
                 ) -> list[str]:
    """Evidence lines of the content search (:mod:`tasks_lib.audits.encoded`): every public
    view holding a reference other than a whole-file byte copy (named by the callers), every
    symlink or special file, every file not searched in full within the decoding caps."""
    index = build_index(root, numbers)
    found, notes = search_public(root, index, samples)
    lines = [f"{n} (rule: the public view holds regular files only)"
             if "symlink" in n or "not a regular file" in n else
             f"{n} (rule: every public file is searched in full within the decoding limits)"
             for n in notes]
    return lines + [h.line() for h in found]

