"""What execute stores besides the agent loop (no sandbox): the submission copy and the trace
files scoring reads (file list, capped plan.md), and their round trip through storage."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tasks_lib.harness.cell import copy_submission
from tasks_lib.harness.messages import ChatMessage, Role
from tasks_lib.harness.trace import PLAN_CAP, TraceRecorder, load_trace, read_head
from tasks_lib.redaction import REDACTED
from tasks_lib.storage import Storage

SECRET = "sk-folder-test-0123456789abcdef"


def test_submission_copy_keeps_links_as_links_and_skips_special_files(tmp_path: Path) -> None:
    source, target = tmp_path / "ws" / "submission", tmp_path / "run" / "submission"
    (source / "nested").mkdir(parents=True)
    (source / "case-000.nii.gz").write_bytes(b"volume")
    (source / "nested" / "answers.csv").write_text("id,answer\n")
    secret = tmp_path / "private.txt"
    secret.write_text("reference")
    (source / "case-001.nii.gz").symlink_to(secret)
    (source / "linked-dir").symlink_to(tmp_path)
    os.mkfifo(source / "pipe")  # reading it would block the copy forever
    copy_submission(source, target)
    assert (target / "case-000.nii.gz").read_bytes() == b"volume"
    assert (target / "nested" / "answers.csv").read_text() == "id,answer\n"
    assert (target / "case-001.nii.gz").is_symlink()  # the scorer rejects it as invalid
    assert os.readlink(target / "case-001.nii.gz") == str(secret)
    assert (target / "linked-dir").is_symlink() and not (target / "pipe").exists()
    copy_submission(tmp_path / "missing", tmp_path / "empty")
    assert list((tmp_path / "empty").iterdir()) == []


def test_trace_files_cap_the_plan_redact_and_round_trip(tmp_path: Path) -> None:
    workspace, trace = tmp_path / "workspace", tmp_path / "run" / "trace"
    (workspace / "submission").mkdir(parents=True)
    (workspace / "submission" / "case-000.nii.gz").write_bytes(b"x")
    (workspace / "plan.md").write_text(f"# Plan {SECRET}\n" + "a" * (2 * PLAN_CAP))
    (workspace / "link.md").symlink_to(workspace / "plan.md")
    os.mkfifo(workspace / "fifo")
    recorder = TraceRecorder(trace, secrets=[SECRET])
    recorder.message(ChatMessage(role=Role.SYSTEM, content=f"key {SECRET}", at=1.0))
    recorder.write_conversation(ChatMessage(role=Role.USER, content="meta", at=0.0))
    recorder.write_workspace(workspace)
    files = json.loads((trace / "workspace.json").read_text())
    assert files == ["plan.md", "submission/case-000.nii.gz"]  # no links, no FIFOs
    plan = (trace / "plan.md").read_text()
    assert plan.startswith(f"# Plan {REDACTED}\n") and len(plan) < PLAN_CAP
    stored = load_trace(Storage(str(trace)))
    assert stored.plan == plan and stored.files == files
    assert stored.submission_files == ["case-000.nii.gz"]
    assert [m.content for m in stored.messages] == [f"key {REDACTED}"]


def test_bounded_read_refuses_links_and_special_files(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"z" * 1000)
    (tmp_path / "link").symlink_to(tmp_path / "big")
    os.mkfifo(tmp_path / "fifo")
    assert read_head(tmp_path / "big", 10) == b"z" * 10
    assert read_head(tmp_path / "link", 10) is None
    assert read_head(tmp_path / "fifo", 10) is None
    assert read_head(tmp_path / "absent", 10) is None


def test_no_plan_means_no_plan_file(tmp_path: Path) -> None:
    recorder = TraceRecorder(tmp_path / "trace", secrets=[])
    recorder.write_conversation(ChatMessage(role=Role.USER, content="meta", at=0.0))
    recorder.write_workspace(tmp_path / "never-created")
    stored = load_trace(Storage(str(tmp_path / "trace")))
    assert stored.plan is None and stored.files == [] and stored.messages == []
