"""The answer-key search by content, shared by every track's audit: each private reference is
fingerprinted once (:class:`ReferenceIndex`: the digests of its bytes and of everything it
decodes to, the digests of its normalized arrays, its JSON rows, its text, its high-precision
numbers), then every public file is decoded (:mod:`tasks_lib.audits.decode`) and each view is
looked up by digest, never compared pairwise. A stack of label maps is found slice by slice: an
array whose first (or last) axis stacks arrays of a reference's shape has each slice looked up.

Symlinks and special files in ``public/`` are findings themselves and are never followed or
opened (:func:`~tasks_lib.audits.pool.list_pool`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from tasks_lib.audits.decode import DEFAULT_DECODE, DecodeLimits, Decoder, View
from tasks_lib.audits.pool import list_pool, read_capped
from tasks_lib.domain import Frozen
from tasks_lib.storage import Storage

MIN_BYTES = 16
"""Shortest decoded content compared by digest (shorter contents are too common to mean a
leak; a whole file is compared at any non-zero size)."""
MIN_ELEMENTS = 16
"""Smallest array compared; constant arrays are never compared (an empty mask is not a key)."""
MIN_TEXT = 40
"""Shortest normalized reference text searched for in public text."""
MIN_ROW = 24
"""Shortest canonical JSON of a reference row that is searched for."""
MIN_DIGITS = 5
"""Significant digits a public number needs to match a reference value."""
_WORD = re.compile(r"[^0-9a-z]+")
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?!\w|\.\d)")


class ReferenceIndex(Frozen):
    """Fingerprints of a pool's private references (each value: the private file it leaks)."""

    raw: dict[str, str] = Field(default_factory=dict, description="sha256 of whole files.")
    decoded: dict[str, str] = Field(default_factory=dict,
                                    description="sha256 of what the files decode to.")
    arrays: dict[str, str] = Field(default_factory=dict,
                                   description="Digest of each normalized reference array.")
    shapes: set[tuple[int, ...]] = Field(default_factory=set,
                                         description="Shapes of the reference arrays.")
    rows: dict[str, tuple[str, int]] = Field(
        default_factory=dict, description="sha256 of each canonical JSON reference row → "
                                          "(private file, row number).")
    texts: dict[str, str] = Field(default_factory=dict,
                                  description="Normalized reference texts.")
    numbers: list[tuple[float, str]] = Field(default_factory=list,
                                             description="High-precision reference values.")


def normalize_text(text: str) -> str:
    """Lower case, every run of non-alphanumerics one space."""
    return _WORD.sub(" ", text.lower()).strip()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def array_digest(array: NDArray[Any]) -> str | None:
    """Digest of an array's values and shape, independent of dtype and memory layout (integral
    values in the smallest integer type holding their range, others as float32); None for
    small, constant or non-numeric arrays."""
    a = np.squeeze(np.asarray(array))
    if a.size < MIN_ELEMENTS or a.dtype.kind not in "biuf":
        return None
    lo, hi = a.min(), a.max()
    if lo == hi:  # constant (NaN compares unequal: such arrays are compared as float)
        return None
    dtype = _canonical_dtype(a, lo, hi)
    c = np.ascontiguousarray(a.astype(dtype, copy=False))
    h = hashlib.sha256(f"{np.dtype(dtype).str}{c.shape}".encode())
    h.update(c.tobytes())
    return h.hexdigest()


def _canonical_dtype(a: NDArray[Any], lo: Any, hi: Any) -> type[np.generic]:
    if a.dtype.kind == "f":
        if not (np.isfinite(lo) and np.isfinite(hi)) or abs(lo) >= 2**53 or abs(hi) >= 2**53:
            return np.float32
        flat = a.reshape(-1)
        sample = flat[:: max(1, flat.size // 4096)]
        if not np.array_equal(sample, np.trunc(sample)) or \
                not np.array_equal(flat, np.trunc(flat)):
            return np.float32
    for dtype in (np.uint8, np.int16, np.int32):
        info = np.iinfo(dtype)
        if info.min <= lo and hi <= info.max:
            return dtype
    return np.int64


def canonical_row(obj: Any) -> str | None:
    """Canonical JSON of a reference row; None when it is too short or holds nothing."""
    if not isinstance(obj, dict) or not obj:
        return None
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) >= MIN_ROW else None


def json_rows(text: str, cap: int = 100_000) -> Iterator[tuple[int, dict[str, Any]]]:
    """Every JSON object (nested ones too, at most ``cap``) of a JSON document or of the lines
    of a JSON-lines text, with the line (JSON lines) or top-level item (a JSON list) holding
    it, counted from 1."""
    docs: list[tuple[int, Any]] = []
    try:
        doc = json.loads(text)
        docs = list(enumerate(doc, 1)) if isinstance(doc, list) else [(1, doc)]
    except (ValueError, RecursionError):
        for n, line in enumerate(text.splitlines(), 1):
            if line.lstrip().startswith(("{", "[")):
                try:
                    docs.append((n, json.loads(line)))
                except (ValueError, RecursionError):
                    continue
    seen = 0
    for top, doc in docs:
        stack = [doc]
        while stack and seen < cap:
            node = stack.pop()
            if isinstance(node, dict):
                seen += 1
                yield top, node
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)


def _significant(token: str) -> int:
    mantissa = re.split(r"[eE]", token.lstrip("+-"))[0].replace(".", "").lstrip("0")
    return len(mantissa)


def _skip(key: str) -> bool:
    return "/zarr/" in f"/{key}" or ".zarr/" in key


def build_index(root: Storage, numbers: list[tuple[float, str]] | None = None,
                limits: DecodeLimits = DEFAULT_DECODE) -> ReferenceIndex:
    """Fingerprint every private file of the pool (zarr chunk stores are skipped: the same
    arrays are stored whole beside them); ``numbers`` adds reference values to search for."""
    index = ReferenceIndex(numbers=list(numbers or []))
    for key in list_pool(root, "private").files:
        if _skip(key):
            continue
        data = read_capped(root, key, limits.max_file_bytes)
        if data is None:
            continue
        index.raw.setdefault(_sha(data), key)  # the index is filled here, then only read
        for view in Decoder(limits, scan_text=False).views(data):
            _add(index, key, view)
    return index


def _add(index: ReferenceIndex, key: str, view: View) -> None:
    if view.array is not None:
        digest = array_digest(view.array)
        if digest is not None:
            index.arrays.setdefault(digest, key)
            index.shapes.add(tuple(int(n) for n in np.squeeze(view.array).shape))
            _add_slices(index, key, np.squeeze(view.array))
        return
    data = view.data or b""
    if view.encoding and len(data) >= MIN_BYTES:
        index.decoded.setdefault(_sha(data), key)
    if view.text is None:
        return
    rows = [(n, canonical_row(r)) for n, r in json_rows(view.text)]
    for n, row in rows:
        if row:
            index.rows.setdefault(_sha(row.encode()), (key, n))
    if not rows and len(norm := normalize_text(view.text)) >= MIN_TEXT:
        index.texts.setdefault(norm, key)


def _add_slices(index: ReferenceIndex, key: str, volume: NDArray[Any]) -> None:
    """The 2D slices of an integer-valued 3D reference (a label map) along each axis, so one
    slice saved as an image is found; slices with fewer than :data:`MIN_ELEMENTS` elements on
    each side of their minimum are too plain to be a key."""
    if volume.ndim != 3 or volume.dtype.kind not in "biu":
        return
    for axis in range(3):
        planes = np.ascontiguousarray(np.moveaxis(volume, axis, 0))  # each slice contiguous
        flat = planes.reshape(len(planes), -1)
        low = np.count_nonzero(flat == flat.min(axis=1, keepdims=True), axis=1)
        plain = np.minimum(low, flat.shape[1] - low) < MIN_ELEMENTS
        for i in np.flatnonzero(~plain):
            digest = array_digest(planes[i])
            if digest is not None:
                index.arrays.setdefault(digest, f"{key} (slice {i} along axis {axis})")


class Hit(Frozen):
    """One public file (or view of it) that holds a reference."""

    key: str = Field(description="The public file.")
    encoding: str = Field(description="How the reference was reached ('' = the file itself).")
    what: str = Field(description="What of the reference it holds.")
    reference: str = Field(description="The private file (and row) it leaks.")

    def line(self) -> str:
        """The evidence line."""
        how = f" ({self.encoding})" if self.encoding else ""
        return (f"{self.key}{how}: {self.what} of the reference {self.reference} (rule: no "
                "public file holds a reference in any encoding)")


def search_public(root: Storage, index: ReferenceIndex, texts_exempt: set[str] | None = None,
                  limits: DecodeLimits = DEFAULT_DECODE) -> tuple[list[Hit], list[str]]:
    """Decode every public file and look each view up in ``index``.

    Args:
        root: The pool root.
        index: The private references' fingerprints.
        texts_exempt: Public keys whose text is not searched for reference rows, texts and
            numbers (the scored sample submission); their bytes and arrays still are.
        limits: Decoding caps.

    Returns:
        The hits (whole-file byte copies excluded: the caller names those) and the notes:
        symlinks, special files and files that could not be searched within the caps.
    """
    listing = list_pool(root, "public")
    hits: list[Hit] = []
    notes = list(listing.odd)
    for key in listing.files:
        data = read_capped(root, key, limits.max_file_bytes)
        if data is None:
            notes.append(f"{key}: larger than {limits.max_file_bytes} bytes, compared by "
                         "digest only (limit max_file_bytes)")
            continue
        decoder = Decoder(limits)
        found: dict[tuple[str, str], Hit] = {}
        for view in decoder.views(data):
            for hit in _lookup(key, view, index, key in (texts_exempt or set())):
                found.setdefault((hit.encoding, hit.reference), hit)
        chains = [h.encoding for h in found.values()]
        hits += [h for h in found.values()  # a match's own decodings are not named again
                 if not any(c != h.encoding and (not c or h.encoding.startswith(f"{c} → "))
                            for c in chains)]
        notes += [f"{key}: not fully searched: {n}" for n in decoder.notes]
    return hits, notes


def _lookup(key: str, view: View, index: ReferenceIndex, exempt: bool) -> Iterator[Hit]:
    if view.array is not None:
        yield from _array_hits(key, view, index)
        return
    data = view.data or b""
    sha = _sha(data)
    if not view.encoding and sha in index.raw:
        return  # a whole-file copy: the caller names it
    ref = index.raw.get(sha) or index.decoded.get(sha)
    if len(data) >= MIN_BYTES and ref is not None:
        what = "the bytes" if view.encoding else "the decoded contents"
        yield Hit(key=key, encoding=view.encoding, what=what, reference=ref)
        return
    if view.text is None or exempt:
        return
    yield from _text_hits(key, view, index)


def _array_hits(key: str, view: View, index: ReferenceIndex) -> Iterator[Hit]:
    a = np.squeeze(np.asarray(view.array))
    digest = array_digest(a)
    if digest in index.arrays:
        yield Hit(key=key, encoding=view.encoding, what="the array values",
                  reference=index.arrays[digest])
        return
    for axis in (0, -1):
        rest = tuple(int(n) for i, n in enumerate(a.shape) if i != axis % max(a.ndim, 1))
        if a.ndim < 2 or rest not in index.shapes:
            continue
        matched: dict[int, str] = {}
        for i in range(a.shape[axis]):
            d = array_digest(np.take(a, i, axis=axis))
            if d in index.arrays:
                matched[i] = index.arrays[d]
        if matched:
            shown = ", ".join(f"{ref} (slice {i})" for i, ref in list(matched.items())[:4])
            more = f" and {len(matched) - 4} more" if len(matched) > 4 else ""
            yield Hit(key=key, encoding=f"{view.encoding} → slices along axis {axis % a.ndim}",
                      what=f"in {len(matched)} of its {a.shape[axis]} slices, the array values",
                      reference=f"{shown}{more}")
            return


def _text_hits(key: str, view: View, index: ReferenceIndex) -> Iterator[Hit]:
    text = view.text or ""
    done: set[str] = set()
    if index.rows:
        rows: dict[str, set[int]] = {}
        for _, row in json_rows(text):
            canon = canonical_row(row)
            found = index.rows.get(_sha(canon.encode())) if canon else None
            if found is not None:
                rows.setdefault(found[0], set()).add(found[1])
        done = set(rows)
        for ref, numbers in rows.items():
            shown = ", ".join(str(n) for n in sorted(numbers)[:5])
            yield Hit(key=key, encoding=view.encoding,
                      what=f"{len(numbers)} JSON row(s) (its rows {shown}"
                           f"{' …' * (len(numbers) > 5)})", reference=ref)
    if index.texts:
        norm = normalize_text(text)
        for ref_text, ref in index.texts.items():
            if ref_text in norm:
                yield Hit(key=key, encoding=view.encoding, what="the text", reference=ref)
    if index.numbers:
        yield from _number_hits(key, view, index, done if index.rows else set())


def _number_hits(key: str, view: View, index: ReferenceIndex, done: set[str]
                 ) -> Iterator[Hit]:
    """One hit per private file whose values the text prints (files already named for their
    rows are left out)."""
    text = view.text or ""
    found: dict[str, list[str]] = {}
    for m in _NUMBER.finditer(text):
        token = m.group(0)
        if _significant(token) < MIN_DIGITS or not any(c in token for c in ".eE"):
            continue
        ref = _number_ref(token, index.numbers)
        if ref is not None and ref.split(" ")[0] not in done:
            line = text.count("\n", 0, m.start()) + 1
            found.setdefault(ref.split(" ")[0], []).append(f"{token} (line {line}) = {ref}")
    for file, values in found.items():
        shown = "; ".join(values[:3]) + (" …" if len(values) > 3 else "")
        yield Hit(key=key, encoding=view.encoding,
                  what=f"{len(values)} unrounded value(s): {shown}", reference=file)


def _number_ref(token: str, numbers: list[tuple[float, str]]) -> str | None:
    """The reference value ``token`` prints (rounded to the token's decimals), if any."""
    try:
        value = Decimal(token)
        step = Decimal(1).scaleb(int(value.as_tuple().exponent))
        for ref_value, ref in numbers:
            if Decimal(repr(ref_value)).quantize(step) == value:
                return ref
    except (InvalidOperation, ValueError, TypeError):
        return None
    return None
