"""Check 5 of the exploit audit, ``egress``: inside the agent sandbox, TCP to a listening
127.0.0.1 port, TCP to an external address and DNS resolution all fail."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from tasks_lib.audits.pool import PoolInfo
from tasks_lib.audits.report import Finding, Severity
from tasks_lib.storage import Storage

if TYPE_CHECKING:
    from tasks_lib.sandbox.base import NetworkPolicy

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


def _network(info: PoolInfo) -> NetworkPolicy:
    """The network policy of the pool's card (its kit finds it); a pool without one card
    (QA, MedBench, RWE pools span several tasks) runs its agents offline."""
    from tasks_lib.sandbox.base import NetworkPolicy
    from tasks_lib.tracks.base import kit_for

    card = kit_for(info.track).card(info.task_id)
    return NetworkPolicy(card.network) if card is not None else NetworkPolicy.NONE


def check_egress(info: PoolInfo, work: Path, sandbox: bool = True) -> Finding:
    """TCP to a listening 127.0.0.1 port, TCP to public addresses and DNS all fail inside the
    agent sandbox (bwrap, the card's network policy)."""
    rule = ("inside the agent sandbox, TCP to a host port listening on 127.0.0.1, TCP to "
            "1.1.1.1:443 / 8.8.8.8:53 and DNS resolution all fail")
    if not sandbox or shutil.which("bwrap") is None:
        return Finding(check="egress", passed=False, severity=Severity.WARNING, rule=rule,
                       evidence=["skipped: no sandbox" + ("" if sandbox else " (--no-sandbox)")])
    from tasks_lib.sandbox.base import Language, agent_spec
    from tasks_lib.sandbox.local import BwrapSandbox

    network = _network(info)
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
