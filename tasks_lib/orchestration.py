"""Prefect settings medflows runs its flows with from the command line.

Prefect 3.8 sends flow-run heartbeats from a thread that sleeps in one-second steps; joining it
costs about a second at the end of every flow run (a flow with one trivial step: 1.1 s with
heartbeats, 0.2 s without). Heartbeats only serve crash detection of runs on a Prefect server
with a "missing heartbeat" automation, so medflows' CLI runs without them unless asked:
``MEDFLOWS_FLOW_HEARTBEAT_S=180`` turns them on, and an explicit
``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` always wins. Flows run by a Prefect worker keep Prefect's
own default.

The temporary Prefect server (started by Prefect when no ``PREFECT_API_URL`` is set: a
``python -m uvicorn … prefect.server.api.server:create_app`` subprocess, stopped by an ``atexit``
hook) would outlive a CLI that is killed (``kill -9``, OOM killer): no ``atexit`` runs. The CLI
therefore launches it through a watchdog (:data:`PARENT_WATCHDOG`) that stops the server as soon
as its parent process is gone. ``PR_SET_PDEATHSIG`` is not used: it fires when the *thread* that
started the child exits, and Prefect may start the server from a short-lived worker thread.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

from tasks_lib.settings import get_settings


@contextmanager
def cli_flow_settings() -> Iterator[None]:
    """Run the enclosed flows with medflows' heartbeat setting; a temporary Prefect server they
    start dies with this process (see the module docstring)."""
    bind_temporary_server_to_process()
    if "PREFECT_FLOWS_HEARTBEAT_FREQUENCY" in os.environ:
        yield
        return
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY:
                                     get_settings().flow_heartbeat_s}):
        yield


PARENT_WATCHDOG = """
import os, signal, sys, threading, time
parent = int(sys.argv[1])

def watch():
    while os.getppid() == parent:
        time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGTERM)  # uvicorn shuts down gracefully
    time.sleep(10)
    os._exit(1)

threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()
sys.argv = ["uvicorn", *sys.argv[2:]]
import runpy
runpy.run_module("uvicorn", run_name="__main__", alter_sys=True)
"""
"""``python -c`` program that runs ``python -m uvicorn ARGS`` (given as ``PARENT_PID ARGS``) and
stops it (SIGTERM, then exit after 10 s) once its parent process ``PARENT_PID`` is gone."""

_SERVER_MODULE = "prefect.server.api.server"
_BIND_LOCK = threading.Lock()


def watched_server_args(args: Sequence[str], parent_pid: int) -> list[str]:
    """``[python, -m, uvicorn, ARGS…]`` → the same server under :data:`PARENT_WATCHDOG`; any
    other command unchanged."""
    args = list(args)
    if args[1:3] == ["-m", "uvicorn"]:
        return [args[0], "-c", PARENT_WATCHDOG, str(parent_pid), *args[3:]]
    return args


class _ParentBoundSubprocess:
    """The ``subprocess`` module as Prefect's server module sees it: ``Popen`` of the uvicorn
    server goes through :data:`PARENT_WATCHDOG` (Prefect's own arguments and environment are
    kept); everything else is the real module."""

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)

    @staticmethod
    def Popen(args: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        return subprocess.Popen(watched_server_args(args, os.getpid()), **kwargs)


def _bind(module: ModuleType) -> None:
    module.subprocess = _ParentBoundSubprocess()  # type: ignore[attr-defined]


class _BindOnImport(importlib.abc.MetaPathFinder):
    """Applies :func:`_bind` right after Prefect's server module is imported (importing it
    eagerly would cost every CLI command seconds; only flows need it)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname != _SERVER_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        loader = spec.loader if spec is not None else None
        if loader is None:
            return spec
        exec_module = loader.exec_module

        def exec_then_bind(module: ModuleType) -> None:
            exec_module(module)
            _bind(module)

        loader.exec_module = exec_then_bind  # type: ignore[method-assign]
        return spec


def bind_temporary_server_to_process() -> None:
    """Make a temporary Prefect server this process starts stop when this process dies.

    No-op when ``PREFECT_API_URL`` names a server (none is started). Idempotent; lasts for the
    rest of the process.
    """
    from prefect.settings import PREFECT_API_URL

    if PREFECT_API_URL.value():
        return
    with _BIND_LOCK:
        if _SERVER_MODULE in sys.modules:
            _bind(sys.modules[_SERVER_MODULE])
        elif not any(isinstance(f, _BindOnImport) for f in sys.meta_path):
            sys.meta_path.insert(0, _BindOnImport())
