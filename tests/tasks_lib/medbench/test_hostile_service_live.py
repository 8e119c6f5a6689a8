"""The MedBench service under load it should shrug off, run as its own uvicorn process on
127.0.0.1 (stopped by its PID): bodies far over the caps streamed at it do not grow its memory
beyond the caps, and a flood of wrong API keys from another address gets 429s while a
legitimate key keeps its normal latency. The failed-key throttle itself is checked in process
(no scrypt hash once a client or key id is throttled)."""

from __future__ import annotations

import os
import select
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import NamedTuple

import httpx
import pytest
from support.ops_support import free_port
from support.services import stop_process, wait_healthy

from tasks_lib.medbench import accounts
from tasks_lib.medbench.accounts import KeyGuard, KeyThrottled
from tasks_lib.settings import PROJECT_ROOT

UPLOAD_CAP = 1 << 20
SERVER = f"""
import sys
import uvicorn
from tasks_lib.medbench.service import ServiceLimits, create_app
limits = ServiceLimits(upload_bytes={UPLOAD_CAP}, json_bytes=64 * 1024, failed_keys=10)
uvicorn.run(create_app(lambda run_id: None, None, limits), host="127.0.0.1",
            port=int(sys.argv[1]), log_level="warning")
"""


class Live(NamedTuple):
    url: str
    port: int
    pid: int
    key: str


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    key = accounts.register("live" + uuid.uuid4().hex[:6]).api_key
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(port)], cwd=PROJECT_ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, lambda: None if proc.poll() is None else (
            proc.stderr.read().decode() if proc.stderr else "service died"), seconds=60)
        yield Live(url, port, proc.pid, key)
    finally:
        stop_process(proc)


def _peak_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


def _stream(port: int, head: str, total: int) -> tuple[int | None, int]:
    """Send ``head`` then a chunked body of up to ``total`` bytes, stopping as soon as the
    server answers or closes; returns (status or None, body bytes sent)."""
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head.encode() + b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n" % (64 << 10) + b" " * (64 << 10) + b"\r\n"
        try:
            while sent < total and not select.select([s], [], [], 0)[0]:
                s.sendall(chunk)
                sent += 64 << 10
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            reply = s.recv(4096)
        except (ConnectionResetError, TimeoutError):
            return None, sent
    return (int(reply.split()[1]) if reply.startswith(b"HTTP/") else None), sent


@pytest.mark.slow
def test_huge_bodies_do_not_grow_memory_beyond_the_caps(live: Live) -> None:
    auth = f"X-API-Key: {live.key}\r\n"
    json_head = "POST /v1/splits HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    upload_head = (f"POST /v1/submissions?model_version=v1 HTTP/1.1\r\nHost: x\r\n{auth}")
    for head in (json_head, upload_head):  # warm up both paths
        _stream(live.port, head, 4 * UPLOAD_CAP)
    before = _peak_rss_kib(live.pid)
    results = [_stream(live.port, head, 40 << 20) for head in (json_head, upload_head) * 3]
    with socket.create_connection(("127.0.0.1", live.port), timeout=10) as s:
        s.sendall(f"{json_head}Content-Length: {300 << 20}\r\n\r\n".encode())
        declared = b"".join(iter(lambda: s.recv(4096), b""))  # answered, then closed,
        # before a byte of the 300 MB is sent
    grown_mib = (_peak_rss_kib(live.pid) - before) / 1024
    assert declared.startswith(b"HTTP/1.1 413 ") and b"larger than 65536 bytes" in declared
    for status, sent in results:
        assert status in (413, None) and sent < 40 << 20, (status, sent)
    assert any(status == 413 for status, _ in results)
    assert grown_mib < 8, f"peak RSS grew {grown_mib:.1f} MiB"
    assert httpx.get(live.url + "/v1/health", timeout=10).status_code == 200


def _timed_get(client: httpx.Client, url: str, key: str) -> tuple[int, float, str | None]:
    t0 = time.perf_counter()
    r = client.get(url, headers={"X-API-Key": key})
    return r.status_code, time.perf_counter() - t0, r.headers.get("retry-after")


ATTACKER = """
import sys, threading, httpx
url, key, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
codes = []

def run():
    transport = httpx.HTTPTransport(local_address="127.0.0.2")
    with httpx.Client(transport=transport, timeout=30) as c:
        for _ in range(n):
            r = c.get(url, headers={"X-API-Key": key})
            codes.append(f"{r.status_code}:{r.headers.get('retry-after')}")

threads = [threading.Thread(target=run) for _ in range(16)]
print("go", flush=True)
for t in threads:
    t.start()
for t in threads:
    t.join()
print(" ".join(codes), flush=True)
"""


@pytest.mark.slow
def test_a_wrong_key_flood_gets_429_and_the_right_key_keeps_its_speed(live: Live) -> None:
    url = live.url + "/v1/submissions"
    victim = accounts.register("victim" + uuid.uuid4().hex[:6]).api_key
    wrong = victim[:-6] + "AAAAAA"  # the victim's key id, a wrong secret
    with httpx.Client(timeout=30) as legit:
        assert _timed_get(legit, url, live.key)[0] == 200  # verified once (scrypt)
        baseline = statistics.median(_timed_get(legit, url, live.key)[1] for _ in range(15))
        attack = subprocess.Popen([sys.executable, "-c", ATTACKER, url, wrong, "40"],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert attack.stdout is not None and attack.stdout.readline().strip() == "go"
            during = [_timed_get(legit, url, live.key) for _ in range(20)]
            out, _ = attack.communicate(timeout=120)
        finally:
            if attack.poll() is None:
                os.kill(attack.pid, signal.SIGKILL)
                attack.wait(timeout=10)
    flood = [(int(code), ra) for code, ra in (x.split(":") for x in out.split())]
    statuses = [code for code, _ in flood]
    assert len(statuses) == 16 * 40
    assert statuses.count(401) <= 10 and statuses.count(429) == len(statuses) - statuses.count(
        401)
    assert all(1 <= int(ra) <= 60 for code, ra in flood if code == 429)
    assert {s for s, _, _ in during} == {200}
    slowed = statistics.median(t for _, t, _ in during)
    assert slowed < 5 * baseline + 0.1, (baseline, slowed)


def _counting_hash(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = accounts._hash

    def counted(secret: str, salt: bytes) -> str:
        calls.append(1)
        return real(secret, salt)

    monkeypatch.setattr(accounts, "_hash", counted)
    return calls


def test_throttled_clients_and_key_ids_are_refused_before_scrypt(
        monkeypatch: pytest.MonkeyPatch) -> None:
    right = accounts.register("thr" + uuid.uuid4().hex[:6]).api_key
    key_id = right.split("_")[1]
    wrong = f"mbk_{key_id}_{'x' * 43}"
    calls = _counting_hash(monkeypatch)
    guard = KeyGuard(max_failures=3, window_s=60)
    assert [guard.authenticate(wrong, "10.0.0.1", now=100 + i) for i in range(3)] == [None] * 3
    assert len(calls) == 3
    with pytest.raises(KeyThrottled) as caught:
        guard.authenticate(wrong, "10.0.0.1", now=103)
    assert caught.value.retry_after_s == pytest.approx(57)
    with pytest.raises(KeyThrottled):  # the key id is throttled for every client
        guard.authenticate(wrong, "10.0.0.9", now=104)
    with pytest.raises(KeyThrottled):  # the right key of a throttled key id, never verified
        guard.authenticate(right, "10.0.0.9", now=104)
    assert len(calls) == 3  # nothing hashed while throttled
    assert guard.authenticate(wrong, "10.0.0.1", now=161) is None  # the window has passed
    assert len(calls) == 4
    assert guard.authenticate(None, "10.0.0.2", now=162) is None
    assert guard.authenticate("mbk_bogus", "10.0.0.2", now=162) is None  # not counted
    assert len(calls) == 4


def test_a_verified_key_works_while_its_key_id_is_flooded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    right = accounts.register("ver" + uuid.uuid4().hex[:6]).api_key
    wrong = right[:-4] + ("zzzz" if not right.endswith("zzzz") else "yyyy")
    calls = _counting_hash(monkeypatch)
    guard = KeyGuard(max_failures=2, window_s=60)
    who = guard.authenticate(right, "10.1.0.1", now=0)
    assert who is not None and len(calls) == 1
    for i in range(2):
        assert guard.authenticate(wrong, f"10.2.0.{i}", now=1 + i) is None
    with pytest.raises(KeyThrottled):
        guard.authenticate(wrong, "10.2.0.9", now=3)
    assert guard.authenticate(right, "10.1.0.1", now=4) == who  # no scrypt: recognised
    assert len(calls) == 3
    unknown = f"mbk_{'0' * 16}_{'x' * 43}"  # an unknown key id counts against the client
    for i in range(2):
        assert guard.authenticate(unknown, "10.3.0.1", now=5 + i) is None
    with pytest.raises(KeyThrottled):
        guard.authenticate(unknown, "10.3.0.1", now=8)
    accounts.issue_key(who.name)  # a new key: the old one stops working, cached or not
    assert guard.authenticate(right, "10.1.0.1", now=9) is None
