"""What the CLI entry does for medflows' services around every command, with the standard
library only: it runs before the command's own imports, and ``medflows --help`` must answer
within a second.

* :func:`apply_local_server` points ``PREFECT_API_URL`` at the local Prefect server
  ``medflows server start`` recorded, before anything imports Prefect.
* :func:`command_scope` runs one command: the services it uses (:func:`note_used`, called by
  :func:`tasks_lib.services.use`) are stopped when it ends unless kept or still used by another
  process (:func:`tasks_lib.services.finish`, imported only then).

``MEDFLOWS_SERVICES_DIR`` and ``MEDFLOWS_KEEP_SERVICES`` are read here, from the environment,
rather than through :mod:`tasks_lib.settings`: loading pydantic-settings on this path would cost
every command, ``--help`` included, a few tenths of a second on this machine. This module is
the only reader of both.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tasks_lib.processes import pid_alive

KEEP_FLAG = "--keep-services"
"""Command-line flag (any position) that keeps what the command started."""

CHECKOUT = Path(__file__).resolve().parents[1]
"""The checkout (``tasks_lib.settings.PROJECT_ROOT``, without loading the settings)."""


def services_dir() -> Path:
    """Folder of the service records: ``MEDFLOWS_SERVICES_DIR``, default
    ``<checkout>/.medflows/services`` (beside the RWE cluster's state folder)."""
    return Path(os.environ.get("MEDFLOWS_SERVICES_DIR") or CHECKOUT / ".medflows" / "services")


def keep_by_default() -> bool:
    """Commands keep what they start (``MEDFLOWS_KEEP_SERVICES=true``; default false)."""
    return os.environ.get("MEDFLOWS_KEEP_SERVICES", "").strip().lower() in {"1", "true", "yes"}


def prefect_home() -> Path:
    """The Prefect home folder a server started now would use (``PREFECT_HOME``)."""
    return Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser().resolve()


_URL_PASSWORD = re.compile(r"(://[^:/@\s]*):[^@\s]+@")
_SECRET_OPTION = re.compile(r"--?[\w-]*(key|token|password|secret)[\w-]*", re.I)


def masked(argv: Sequence[str]) -> list[str]:
    """``argv`` with URL passwords and the values of secret-looking options masked."""
    words, hide = [], False
    for arg in argv:
        name, eq, _ = arg.partition("=")
        if hide:
            words.append("***")
        elif eq and _SECRET_OPTION.fullmatch(name):
            words.append(f"{name}=***")
        else:
            words.append(_URL_PASSWORD.sub(r"\1:***@", arg))
        hide = bool(_SECRET_OPTION.fullmatch(arg))
    return words


def joined(words: Sequence[str]) -> str:
    """Words as one line, quoted only where a word has spaces or quotes."""
    return " ".join(shlex.quote(w) if re.search(r"[\s'\"]", w) or not w else w for w in words)


def command_line(argv: Sequence[str]) -> str:
    """``medflows ARGS`` as recorded (see :func:`masked`)."""
    return joined(["medflows", *masked(argv)])


@dataclass
class Command:
    """The CLI command running in this process."""

    line: str
    keep: bool
    used: set[str] = field(default_factory=set)


_COMMAND: Command | None = None
_LOCK = threading.Lock()


def current_command() -> Command | None:
    """The command running in this process (None: not run by the CLI)."""
    with _LOCK:
        return _COMMAND


def note_used(key: str) -> None:
    """The running command used service ``key`` (nothing outside a command)."""
    with _LOCK:
        if _COMMAND is not None:
            _COMMAND.used.add(key)


@contextmanager
def command_scope(argv: Sequence[str]) -> Iterator[list[str]]:
    """Run one CLI command: yields ``argv`` without :data:`KEEP_FLAG`; on the way out, stops
    every service the command used that is not kept and that no other live process uses (a
    service that would not stop is named on stderr)."""
    global _COMMAND
    args = [a for a in argv if a != KEEP_FLAG]
    command = Command(command_line(args), KEEP_FLAG in argv or keep_by_default())
    with _LOCK:
        _COMMAND = command
    try:
        yield args
    finally:
        with _LOCK:
            _COMMAND = None
        if command.used:
            # Only tasks_lib.services marks a service used (note_used), so it is imported by
            # now; looked up rather than imported, as it imports this module.
            finish = sys.modules["tasks_lib.services"].finish
            for problem in finish(command):
                sys.stderr.write(f"warning: {problem}\n")


def apply_local_server() -> str | None:
    """Point this process's Prefect at the local server ``medflows server start`` recorded,
    when it is alive, serves the same ``PREFECT_HOME`` and no ``PREFECT_API_URL`` is set; its
    API URL (None: nothing changed). Call before Prefect is imported (it reads the URL then)."""
    if os.environ.get("PREFECT_API_URL"):
        return None
    try:
        record = json.loads((services_dir() / "prefect-server.json").read_text(encoding="utf-8"))
        pid, start, home, url = (int(record["pid"]), record["proc_start"], record["home"],
                                 str(record["address"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if home != str(prefect_home()) or not pid_alive(pid, start):
        return None
    os.environ["PREFECT_API_URL"] = url
    return url
