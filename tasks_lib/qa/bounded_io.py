"""Bounded reading of QA input files: size caps enforced while streaming, gzip chosen by the file
name, UTF-8 lines with a length cap.

The file-level rules (what refuses a whole file) are described in :mod:`tasks_lib.qa.ingest`.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, BinaryIO, NamedTuple

import fsspec

from tasks_lib.errors import InputDataError
from tasks_lib.qa.types import QAInputLimits

GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_CHUNK = 1 << 16


class _BoundedStream(io.RawIOBase):
    """A read-only byte stream over ``raw`` that enforces the stored and decompressed size caps
    while reading and inflates gzip data member by member, never more than asked for."""

    def __init__(self, raw: IO[bytes], source: str, limits: QAInputLimits, gz: bool,
                 head: bytes) -> None:
        super().__init__()
        self._raw, self._source, self._limits, self._gz = raw, source, limits, gz
        self._stored = len(head)
        self._inbuf = head
        self._out = 0
        self._inflater: Any = zlib.decompressobj(31) if gz else None

    def readable(self) -> bool:
        return True

    def _read_raw(self, n: int) -> bytes:
        chunk: bytes = self._raw.read(n)
        self._stored += len(chunk)
        if self._stored > self._limits.max_file_bytes:
            raise InputDataError(self._source, f"file is larger than max_file_bytes "
                                 f"({self._limits.max_file_bytes} bytes)")
        return chunk

    def _count(self, out: bytes) -> bytes:
        self._out += len(out)
        if self._gz and self._out > self._limits.max_decompressed_bytes:
            raise InputDataError(self._source, "gzip data decompresses to more than "
                                 f"max_decompressed_bytes ({self._limits.max_decompressed_bytes} "
                                 "bytes); refused while decompressing")
        return out

    def _read_plain(self, n: int) -> bytes:
        if self._inbuf:
            out, self._inbuf = self._inbuf[:n], self._inbuf[n:]
            return out
        return self._read_raw(n)

    def _next_member(self) -> bool:
        """After a gzip member ends: start the next one; False at a clean end of data."""
        rest = self._inflater.unused_data  # at the end of a member it holds all unread input
        while len(rest) < 2:
            more = self._read_raw(_CHUNK)
            if not more:
                break
            rest += more
        if not rest:
            return False
        if not rest.startswith(GZIP_MAGIC):
            while rest:  # NUL padding after the last member is allowed (gzip does the same)
                if rest.strip(b"\0"):
                    raise InputDataError(self._source, "unexpected data after the end of the "
                                         "gzip stream")
                rest = self._read_raw(_CHUNK)
            return False
        self._inflater = zlib.decompressobj(31)
        self._inbuf = rest
        return True

    def _read_gz(self, n: int) -> bytes:
        while True:
            if self._inflater.eof and not self._next_member():
                return b""
            if not self._inbuf:
                self._inbuf = self._read_raw(_CHUNK)
                if not self._inbuf:
                    raise InputDataError(self._source, "truncated gzip data (the file ends "
                                         "inside the compressed stream)")
            try:
                out: bytes = self._inflater.decompress(self._inbuf, n)
            except zlib.error as exc:
                raise InputDataError(self._source, f"corrupt gzip data ({exc})") from None
            self._inbuf = self._inflater.unconsumed_tail
            if out:
                return out

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self._read_gz(len(view)) if self._gz else self._read_plain(len(view))
        view[: len(data)] = data
        return len(self._count(data))


@contextmanager
def _open_bounded(source: str, limits: QAInputLimits, kind: str) -> Iterator[BinaryIO]:
    """Open ``source`` (path or fsspec URL) as a bounded, decompressing byte stream; ``kind``
    names the file in messages ("question file")."""
    try:
        opened = fsspec.open(source, "rb")
        raw = opened.open()
    except FileNotFoundError:
        raise InputDataError(source, f"{kind} not found") from None
    except IsADirectoryError:
        raise InputDataError(source, "is a folder, not a file") from None
    except PermissionError:
        raise InputDataError(source, "cannot read the file: permission denied") from None
    except OSError as exc:
        raise InputDataError(source, f"cannot read the file: {exc.strerror or exc}") from None
    try:
        try:
            head: bytes = raw.read(2)
        except IsADirectoryError:
            raise InputDataError(source, "is a folder, not a file") from None
        except OSError as exc:
            raise InputDataError(source, f"cannot read the file: {exc.strerror or exc}") from None
        if not head:
            raise InputDataError(source, f"{kind} is empty")
        gz = source.lower().endswith(".gz")
        if gz and head != GZIP_MAGIC:
            raise InputDataError(source, "the name ends in .gz but the file is not gzip data")
        if not gz and head == GZIP_MAGIC:
            raise InputDataError(source, "gzip-compressed data in a file whose name does not "
                                 "end in .gz")
        stream = io.BufferedReader(_BoundedStream(raw, source, limits, gz, head),
                                   buffer_size=_CHUNK)
        yield stream
    finally:
        raw.close()


class Line(NamedTuple):
    """One physical line: its 1-based number and bytes without the line ending (None: the line
    is longer than ``max_line_bytes`` and was not kept)."""

    number: int
    data: bytes | None


def read_lines(source: str, limits: QAInputLimits, kind: str = "file") -> Iterator[Line]:
    """Stream the lines of a (possibly gzip) file within ``limits``; a leading UTF-8 BOM is
    dropped, CRLF endings are accepted, a UTF-16 file is refused.

    Raises:
        InputDataError: the file cannot be read or breaks a file-level limit (see module doc).
    """
    with _open_bounded(source, limits, kind) as stream:
        number = 0
        cap = limits.max_line_bytes
        while True:
            chunk = stream.readline(cap + 2)
            if not chunk:
                break
            number += 1
            if number == 1:
                if chunk.startswith(UTF16_BOMS):
                    raise InputDataError(source, "UTF-16 text; save the file as UTF-8", line=1)
                chunk = chunk.removeprefix(UTF8_BOM)
            body = chunk.removesuffix(b"\n").removesuffix(b"\r")
            if len(body) > cap:
                while not chunk.endswith(b"\n"):  # skip the rest of the line, bounded
                    chunk = stream.readline(_CHUNK)
                    if not chunk:
                        break
                yield Line(number, None)
                continue
            yield Line(number, body)


def read_text(source: str, limits: QAInputLimits, kind: str = "file") -> str:
    """The whole text of a (possibly gzip) UTF-8 file, read within ``limits`` (the size caps
    bound what is held); a UTF-8 BOM is dropped.

    Raises:
        InputDataError: as :func:`read_lines`; text that is not UTF-8 names the line.
    """
    with _open_bounded(source, limits, kind) as stream:
        data = stream.read()
    if data.startswith(UTF16_BOMS):
        raise InputDataError(source, "UTF-16 text; save the file as UTF-8", line=1)
    data = data.removeprefix(UTF8_BOM)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        raise InputDataError(
            source, f"not UTF-8 text: byte 0x{data[exc.start]:02x} at column "
            f"{exc.start - line_start + 1}", line=data.count(b"\n", 0, exc.start) + 1) from None


def decode_line(line: Line, limits: QAInputLimits) -> str:
    """The text of a line, or ``ValueError`` naming the rule it breaks (too long, not UTF-8)."""
    if line.data is None:
        raise ValueError(f"line is longer than max_line_bytes ({limits.max_line_bytes} bytes)")
    try:
        return line.data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text: byte 0x{line.data[exc.start]:02x} at column "
                         f"{exc.start + 1}") from None
