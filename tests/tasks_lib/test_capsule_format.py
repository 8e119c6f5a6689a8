"""The capsule format (tasks_lib/capsule/archive.py) and the call journal that tells an export
which call-cache entries a run used: archives of every kind read back member for member and are
reproducible; every way a capsule can differ from what was exported is refused naming the member,
before anything is written outside the unpacking folder."""

from __future__ import annotations

import io
import tarfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fsspec.implementations.local import LocalFileSystem
from support.openai_server import FakeOpenAIServer

from evaluators.core import InputDataError
from tasks_lib.capsule.archive import (
    CAPSULE_JSON,
    FORMAT,
    CapsuleManifest,
    CapsuleWriter,
    open_capsule,
)

MEMBERS = {"runs/r1/run.json": b'{"run_id": "r1"}\n',
           "runs/r1/submission/answers.jsonl": b'{"answer": "B"}\n' * 50,
           "llm-cache/ab/abcdef.json": b'{"text": "The answer is (B)."}'}


def _manifest() -> CapsuleManifest:
    return CapsuleManifest(
        format=FORMAT, created_at=datetime(2025, 1, 1, tzinfo=UTC), medflows_version="test",
        scope="run r1", private=False, cards=[], pools=[], runs=[], evaluator_versions={},
        call_cache_entries=1, call_cache_missing=0, members={})


def _write(path: Path, source: Path) -> CapsuleManifest:
    """A capsule of :data:`MEMBERS`: one streamed from a local file, the others as bytes."""
    streamed = source / "answers.jsonl"
    streamed.parent.mkdir(parents=True, exist_ok=True)
    streamed.write_bytes(MEMBERS["runs/r1/submission/answers.jsonl"])
    writer = CapsuleWriter(path)
    for name, data in MEMBERS.items():
        if name.endswith("answers.jsonl"):
            writer.add_file(name, LocalFileSystem(), str(streamed), len(data))
        else:
            writer.add_bytes(name, data)
    return writer.close(_manifest())


@pytest.mark.parametrize("name", ["c.tar", "c.tar.gz", "c.tgz", "c.zip"])
def test_every_kind_reads_back_member_for_member_and_is_reproducible(tmp_path: Path,
                                                                     name: str) -> None:
    written = _write(tmp_path / name, tmp_path / "src")
    assert sorted(written.members) == sorted(MEMBERS)
    again = _write(tmp_path / "again" / name, tmp_path / "src")
    assert (tmp_path / name).read_bytes() == (tmp_path / "again" / name).read_bytes()
    read = open_capsule(tmp_path / name, tmp_path / "out")
    assert read == written == again
    for member, data in MEMBERS.items():
        assert (tmp_path / "out" / member).read_bytes() == data
        assert read.members[member].size == len(data)


def _flip_inside(data: bytes, inside: bytes) -> bytes:
    at = data.index(inside) + len(inside) // 2
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:]


def _refused(path: Path, out: Path) -> str:
    with pytest.raises(InputDataError) as caught:
        open_capsule(path, out)
    return str(caught.value)


def test_one_changed_byte_in_a_tar_member_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "c.tar"
    _write(path, tmp_path / "src")
    path.write_bytes(_flip_inside(path.read_bytes(), b'{"text": "The answer is (B)."}'))
    message = _refused(path, tmp_path / "out")
    assert message.startswith(f"{path}: member llm-cache/ab/abcdef.json does not match "
                              "capsule.json (sha256 ")
    assert message.endswith("it was changed after export; nothing was imported")


def test_one_changed_byte_in_a_compressed_zip_member_is_refused_naming_it(
        tmp_path: Path) -> None:
    import zipfile

    path = tmp_path / "c.zip"
    _write(path, tmp_path / "src")
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("runs/r1/submission/answers.jsonl")
    data = bytearray(path.read_bytes())
    header = data[info.header_offset:info.header_offset + 30]  # the local file header
    start = (info.header_offset + 30 + int.from_bytes(header[26:28], "little")
             + int.from_bytes(header[28:30], "little"))
    data[start + info.compress_size // 2] ^= 0x01  # inside the deflated bytes
    path.write_bytes(bytes(data))
    message = _refused(path, tmp_path / "out")
    assert "member runs/r1/submission/answers.jsonl" in message and "nothing was imported" in \
        message


def test_a_changed_hash_in_capsule_json_names_the_member(tmp_path: Path) -> None:
    path = tmp_path / "c.tar"
    written = _write(path, tmp_path / "src")
    digest = written.members["runs/r1/run.json"].sha256.encode()
    path.write_bytes(path.read_bytes().replace(digest, digest[:-1] + b"0"
                                               if not digest.endswith(b"0") else b"1"))
    assert "member runs/r1/run.json does not match capsule.json" in _refused(path, tmp_path / "o")


def _retar(path: Path, extra: dict[str, Any], drop: str | None = None) -> None:
    """Rewrite the tar with ``extra`` members (bytes, or a TarInfo for a special file) and
    without ``drop``."""
    with tarfile.open(path) as tf:
        kept = [(m, tf.extractfile(m).read()) for m in tf.getmembers()  # type: ignore[union-attr]
                if m.name != drop]
    with tarfile.open(path, "w") as tf:
        for info, data in kept:
            tf.addfile(info, io.BytesIO(data))
        for name, value in extra.items():
            if isinstance(value, tarfile.TarInfo):
                tf.addfile(value)
                continue
            info = tarfile.TarInfo(name)
            info.size = len(value)
            tf.addfile(info, io.BytesIO(value))


def test_added_missing_special_and_escaping_members_are_refused(tmp_path: Path) -> None:
    cases: list[tuple[dict[str, Any], str | None, str]] = [
        ({"runs/r1/extra.txt": b"x"}, None, f"member runs/r1/extra.txt is not listed in "
                                             f"{CAPSULE_JSON}"),
        ({}, "runs/r1/run.json", f"member runs/r1/run.json is listed in {CAPSULE_JSON} but "
                                 "missing"),
        ({"../escaped.txt": b"x"}, None, "member ../escaped.txt: member name '../escaped.txt' "
                                         "is not a clean relative path"),
        ({"runs/r1/link": _symlink()}, None, "member runs/r1/link is not a regular file"),
        ({"runs/r1/run.json": b"again"}, None, "member runs/r1/run.json appears twice"),
    ]
    for i, (extra, drop, expected) in enumerate(cases):
        path = tmp_path / f"c{i}.tar"
        _write(path, tmp_path / "src")
        _retar(path, extra, drop)
        assert expected in _refused(path, tmp_path / f"out{i}"), expected
    assert not (tmp_path / "escaped.txt").exists()


def _symlink() -> tarfile.TarInfo:
    info = tarfile.TarInfo("runs/r1/link")
    info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
    return info


def test_newer_format_unknown_type_and_foreign_files_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.tar"
    writer = CapsuleWriter(path)
    writer.add_bytes("a.txt", b"a")
    writer.close(_manifest().model_copy(update={"format": FORMAT + 1}))
    assert f"capsule format {FORMAT + 1} is newer than this medflows reads" in \
        _refused(path, tmp_path / "o1")
    with pytest.raises(InputDataError, match="unknown capsule type; name it with one of "
                                             r"\.tar, \.tar\.gz, \.tgz, \.zip"):
        CapsuleWriter(tmp_path / "c.rar")
    plain = tmp_path / "plain.tar"
    with tarfile.open(plain, "w") as tf:
        tf.add(path, arcname="something.tar")
    assert "no capsule.json: not a medflows capsule" in _refused(plain, tmp_path / "o2")
    garbage = tmp_path / "garbage.tar.gz"
    garbage.write_bytes(b"\x1f\x8b not really gzip")
    assert "not a readable capsule" in _refused(garbage, tmp_path / "o3")


def test_the_journal_lists_every_key_a_run_used_across_threads(cache_on: Path) -> None:
    """Distinct prompts, repeated samples on gather branches and cache hits: the journal holds
    one key per cache entry the calls read or wrote, and nothing outside it is recorded."""
    from tasks_lib.llm import LiteLLMCompletion, Message
    from tasks_lib.llm_cache import call_journal, read_journal, write_journal
    from tasks_lib.llm_scope import call_scope, gather
    from tasks_lib.storage import Storage

    def ask(door: LiteLLMCompletion, text: str) -> str:
        return door("gpt-4o-mini", [Message(role="user", content=text)]).text

    with FakeOpenAIServer(lambda body: "The answer is (A).") as srv:
        door = LiteLLMCompletion(api_base=srv.base_url)
        ask(door, "outside any journal")
        with call_journal() as first, call_scope():
            ask(door, "one")
            gather([lambda: ask(door, "two"), lambda: ask(door, "two")])
        with call_journal() as second, call_scope():
            ask(door, "one")
            gather([lambda: ask(door, "two"), lambda: ask(door, "two")])
        assert len(srv.requests) == 4  # the second journal's calls were all cache hits
    stored = {p.stem for p in (cache_on / "llm-cache").rglob("*.json")}
    assert len(first) == 3 and first == second and first < stored and len(stored) == 4
    folder = Storage(str(cache_on)).child("runs/r1")
    write_journal(folder, "chunk-000000", first)
    write_journal(folder, "empty", set())
    assert read_journal(folder) == sorted(first)
    assert folder.list("calls") == ["calls/chunk-000000.txt"]


def test_a_link_in_an_exported_folder_is_refused_not_followed(tmp_path: Path) -> None:
    """An agent's symlink in its submission (scored invalid) must not travel as the bytes of
    the host file it points at."""
    from tasks_lib.capsule.export import _files
    from tasks_lib.storage import Storage

    folder = tmp_path / "run" / "submission"
    folder.mkdir(parents=True)
    (folder / "answers.csv").write_text("id,answer\n1,B\n")
    assert [k for k, _, _ in _files(Storage(str(tmp_path / "run")))] == [
        "submission/answers.csv"]
    (folder / "leak.csv").symlink_to("/etc/hostname")
    with pytest.raises(InputDataError, match=r"submission/leak\.csv: not a regular file"):
        _files(Storage(str(tmp_path / "run")))
