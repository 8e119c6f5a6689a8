"""Bounded decoding of one stored file into what it holds, for the answer-key search: the raw
bytes, the members of gzip / bzip2 / xz streams and zip / tar archives (an ``.npz`` is a zip of
``.npy``), the base64 and hex runs of a text, the arrays of NPY, NIfTI and image files (PNG,
TIFF, JPEG), and the text itself.

Every step is capped (:class:`DecodeLimits`): inflated bytes per stream and per file, archive
members, nested encodings, array bytes declared by a header (checked before anything is
allocated), text runs. A file that breaks a cap yields a note naming the cap; its views up to
that point are still searched.
"""

from __future__ import annotations

import base64
import binascii
import bz2
import io
import lzma
import re
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from tasks_lib.domain import Frozen

MiB = 2**20


class DecodeLimits(Frozen):
    """What decoding one stored file may cost."""

    max_file_bytes: int = Field(default=256 * MiB, description="Bytes of a file that is "
                                "decoded (larger files are compared by digest only).")
    max_stream_bytes: int = Field(default=512 * MiB,
                                  description="Bytes one compressed stream or member inflates to.")
    max_total_bytes: int = Field(default=1024 * MiB,
                                 description="Bytes of all the decoded views of one file.")
    max_members: int = Field(default=10_000, description="Members of one zip or tar archive.")
    max_depth: int = Field(default=4, description="Encodings nested in one another.")
    max_array_bytes: int = Field(default=512 * MiB,
                                 description="Bytes of one array (declared by its header).")
    max_runs: int = Field(default=10_000, description="base64/hex runs decoded in one text.")
    min_run_chars: int = Field(default=32, description="Shortest base64/hex run decoded.")


DEFAULT_DECODE = DecodeLimits()


class View(NamedTuple):
    """One thing a file holds: ``encoding`` says how it was reached (``""``: the file itself,
    else e.g. ``"gzip → NIfTI voxels"``); exactly one of ``data``, ``array`` is set, ``text``
    is the UTF-8 text of ``data`` when it reads as text."""

    encoding: str
    data: bytes | None = None
    array: NDArray[Any] | None = None
    text: str | None = None


class LimitReached(Exception):
    """A decoding cap was reached (the message names it)."""


B64_RUN = re.compile(rb"(?:[A-Za-z0-9+/_-]{4}|(?:\\n|\r?\n)){8,}(?:[A-Za-z0-9+/_-]{2,3}={0,2})?")
"""A base64 (or base64url) run, possibly wrapped in lines (real or JSON-escaped newlines)."""
HEX_RUN = re.compile(rb"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}){33,}(?![0-9A-Fa-f])")
"""A hex run longer than a sha256 digest (digests are compared as digests)."""
NIFTI_MAGIC = (b"n+1\x00", b"ni1\x00")
IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"II*\x00", b"MM\x00*", b"\xff\xd8\xff")


def _join(chain: str, step: str) -> str:
    return f"{chain} → {step}" if chain else step


class Decoder:
    """Decodes one file's bytes into :class:`View` s within ``limits`` (one instance per
    file: the byte budget is per file)."""

    def __init__(self, limits: DecodeLimits = DEFAULT_DECODE, scan_text: bool = True) -> None:
        self.limits = limits
        self.scan_text = scan_text
        self.spent = 0
        self.notes: list[str] = []

    def views(self, data: bytes) -> Iterator[View]:
        """Every view of ``data`` (the raw bytes first); caps reached are in :attr:`notes`."""
        try:
            yield from self._views(data, "", 0)
        except LimitReached as exc:
            self.notes.append(str(exc))

    def _charge(self, n: int) -> None:
        self.spent += n
        if self.spent > self.limits.max_total_bytes:
            raise LimitReached(f"its decoded contents exceed {self.limits.max_total_bytes} bytes "
                               "(limit max_total_bytes)")

    def _views(self, data: bytes, chain: str, depth: int) -> Iterator[View]:
        text = _as_text(data)
        yield View(chain, data=data, text=text)
        if depth >= self.limits.max_depth:
            return
        head = data[:8]
        if head[:2] == b"\x1f\x8b":
            yield from self._stream(data, chain, depth, "gzip",
                                    lambda: zlib.decompressobj(16 + zlib.MAX_WBITS))
        elif head[:3] == b"BZh":
            yield from self._stream(data, chain, depth, "bzip2", bz2.BZ2Decompressor)
        elif head[:6] == b"\xfd7zXZ\x00":
            yield from self._stream(data, chain, depth, "xz", lzma.LZMADecompressor)
        elif head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
            yield from self._zip(data, chain, depth)
        elif data[257:262] == b"ustar":
            yield from self._tar(data, chain, depth)
        elif head[:6] == b"\x93NUMPY":
            yield from self._array(_npy(data, self.limits), chain, "npy")
        elif data[344:348] in NIFTI_MAGIC:
            yield from self._array(_nifti(data, self.limits), chain, "NIfTI voxels")
        elif any(data.startswith(m) for m in IMAGE_MAGIC):
            yield from self._array(_image(data, self.limits), chain, "image pixels")
        elif text is not None and self.scan_text:
            yield from self._runs(data, chain, depth)

    def _array(self, array: NDArray[Any] | None, chain: str, step: str) -> Iterator[View]:
        if array is not None:
            self._charge(array.nbytes)
            yield View(_join(chain, step), array=array)

    def _stream(self, data: bytes, chain: str, depth: int, name: str, make: Any
                ) -> Iterator[View]:
        out: list[bytes] = []
        size = 0
        rest = data
        cap = self.limits.max_stream_bytes
        while rest:  # concatenated members (gzip)
            d = make()
            buf = rest
            try:
                while not d.eof:
                    chunk = d.decompress(buf, min(cap + 1 - size, 4 * MiB))
                    buf = d.unconsumed_tail if hasattr(d, "unconsumed_tail") else b""
                    if not chunk and not buf and (not hasattr(d, "needs_input") or d.needs_input):
                        break
                    out.append(chunk)
                    size += len(chunk)
                    if size > cap:
                        raise LimitReached(f"{_join(chain, name)} inflates past {cap} bytes "
                                           "(limit max_stream_bytes)")
            except (zlib.error, OSError, EOFError, lzma.LZMAError):
                break  # corrupt or truncated: what was inflated so far is still searched
            rest = d.unused_data if d.eof else b""
            if rest[:2] != data[:2]:
                break
        self._charge(size)
        yield from self._views(b"".join(out), _join(chain, name), depth + 1)

    def _member(self, fh: Any, chain: str, depth: int, step: str) -> Iterator[View]:
        cap = self.limits.max_stream_bytes
        body = fh.read(cap + 1)
        if len(body) > cap:
            raise LimitReached(f"{_join(chain, step)} inflates past {cap} bytes "
                               "(limit max_stream_bytes)")
        self._charge(len(body))
        yield from self._views(body, _join(chain, step), depth + 1)

    def _zip(self, data: bytes, chain: str, depth: int) -> Iterator[View]:
        try:
            zf = zipfile.ZipFile(io.BytesIO(data))
            infos = zf.infolist()
        except (zipfile.BadZipFile, OSError, ValueError):
            return
        if len(infos) > self.limits.max_members:
            self.notes.append(f"{_join(chain, 'zip')} has {len(infos)} members; the first "
                              f"{self.limits.max_members} were searched (limit max_members)")
        for info in infos[: self.limits.max_members]:
            if info.is_dir():
                continue
            try:
                with zf.open(info) as fh:
                    yield from self._member(fh, chain, depth, f"zip member {info.filename}")
            except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, EOFError,
                    zlib.error):
                continue

    def _tar(self, data: bytes, chain: str, depth: int) -> Iterator[View]:
        try:
            tf = tarfile.open(fileobj=io.BytesIO(data), mode="r:")  # noqa: SIM115 (in memory)
        except (tarfile.TarError, OSError):
            return
        for n, info in enumerate(iter(tf.next, None)):
            if n >= self.limits.max_members:
                self.notes.append(f"{_join(chain, 'tar')} has more than "
                                  f"{self.limits.max_members} members; the first were "
                                  "searched (limit max_members)")
                return
            if not info.isreg():  # links are never followed
                continue
            fh = tf.extractfile(info)
            if fh is not None:
                yield from self._member(fh, chain, depth, f"tar member {info.name}")

    def _runs(self, data: bytes, chain: str, depth: int) -> Iterator[View]:
        runs = 0
        for pattern, name in ((B64_RUN, "base64"), (HEX_RUN, "hex")):
            for m in pattern.finditer(data):
                raw = m.group(0)
                if len(raw) < self.limits.min_run_chars:
                    continue
                runs += 1
                if runs > self.limits.max_runs:
                    self.notes.append(f"{_join(chain, 'text')} has more than "
                                      f"{self.limits.max_runs} encoded runs; the first were "
                                      "searched (limit max_runs)")
                    return
                body = _unbase64(raw) if name == "base64" else _unhex(raw)
                if body is not None and len(body) >= 24:
                    self._charge(len(body))
                    line = data.count(b"\n", 0, m.start()) + 1
                    yield from self._views(body, _join(chain, f"{name} run on line {line}"),
                                           depth + 1)


def _as_text(data: bytes) -> str | None:
    """The text of ``data`` if it is UTF-8 without NUL bytes (checked on the first 64 KiB)."""
    if b"\x00" in data[:65536]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _unbase64(raw: bytes) -> bytes | None:
    body = re.sub(rb"\\n|\s", b"", raw)
    if b"-" in body or b"_" in body:
        body = body.replace(b"-", b"+").replace(b"_", b"/")
    body += b"=" * (-len(body) % 4)
    try:
        return base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        return None


def _unhex(raw: bytes) -> bytes | None:
    try:
        return bytes.fromhex(raw.decode("ascii"))
    except ValueError:
        return None


def _npy(data: bytes, limits: DecodeLimits) -> NDArray[Any] | None:
    from tasks_lib.errors import InvalidSubmissionError
    from tasks_lib.imaging.decoders import load_image
    from tasks_lib.submission_limits import SubmissionLimits

    sub = SubmissionLimits(max_array_bytes=limits.max_array_bytes)
    try:
        return load_image(data, "npy", None, sub)
    except InvalidSubmissionError:
        return None


def _nifti(data: bytes, limits: DecodeLimits) -> NDArray[Any] | None:
    from tasks_lib.errors import InvalidSubmissionError
    from tasks_lib.imaging.decoders import load_label_map
    from tasks_lib.submission_limits import SubmissionLimits

    sub = SubmissionLimits(max_array_bytes=limits.max_array_bytes,
                           max_decompressed_bytes=limits.max_stream_bytes)
    try:
        return load_label_map(data, "NIfTI", None, sub)
    except InvalidSubmissionError:
        return None


def _image(data: bytes, limits: DecodeLimits) -> NDArray[Any] | None:
    """Pixels of a PNG / TIFF / JPEG (PNG: the header's size checked before decoding; the
    others: Pillow's decompression-bomb guard)."""
    import imageio.v3 as iio
    from PIL import Image

    if data.startswith(IMAGE_MAGIC[0]) and len(data) >= 24:
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        if width * height * 8 > limits.max_array_bytes:
            return None
    try:
        return np.asarray(iio.imread(data))
    except (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError):
        return None
