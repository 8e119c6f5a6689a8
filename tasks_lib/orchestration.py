"""Prefect settings medflows runs its flows with from the command line, and where Prefect's
console output goes.

Nothing here imports Prefect: each adjustment is applied right after the Prefect module it
concerns is imported (:func:`after_import`), so a command that runs no flow (``--help``,
``runs list``, ``report``) never pays for Prefect.

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

A command's console stays for its answer (ARCHITECTURE §6: a failure is one ``error:`` line):
:func:`route_console_logs` sends what Prefect would print on the console — flow and step logs, the
traceback of a failed step, the temporary server's own output and its shutdown noise — to a
:class:`ConsoleLog` file, keeping only the warnings of flows and steps on stderr.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    import ssl

Hook = Callable[[ModuleType], None]
"""Called with a module right after it is imported."""
_HOOKS: dict[str, list[Hook]] = {}
_HOOK_LOCK = threading.RLock()


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs the :data:`_HOOKS` of a module right after the module's code has run."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if not _HOOKS.get(fullname):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        loader = spec.loader if spec is not None else None
        if loader is None:
            return spec
        exec_module = loader.exec_module

        def exec_then_hooks(module: ModuleType) -> None:
            exec_module(module)
            with _HOOK_LOCK:
                hooks = _HOOKS.pop(fullname, [])
            for hook in hooks:
                hook(module)

        loader.exec_module = exec_then_hooks  # type: ignore[method-assign]
        return spec


def after_import(name: str, hook: Hook) -> Callable[[], None]:
    """Call ``hook(module)`` once module ``name`` is imported: now if it is, else right after
    its import (importing it eagerly would cost every command its import time).

    Returns:
        A function that cancels the hook if it has not run yet (registering the same hook twice
        while it waits is one registration).
    """
    with _HOOK_LOCK:
        module = sys.modules.get(name)
        if module is None:
            waiting = _HOOKS.setdefault(name, [])
            if hook not in waiting:
                waiting.append(hook)
            if not any(isinstance(f, _AfterImport) for f in sys.meta_path):
                sys.meta_path.insert(0, _AfterImport())

            def cancel() -> None:
                with _HOOK_LOCK:
                    if hook in _HOOKS.get(name, []):
                        _HOOKS[name].remove(hook)

            return cancel
    hook(module)
    return lambda: None


@contextmanager
def cli_flow_settings() -> Iterator[None]:
    """Run the enclosed flows with medflows' heartbeat setting; a temporary Prefect server they
    start dies with this process (see the module docstring). Applied when Prefect is imported
    (now, if it is); a command that never imports Prefect is not slowed down."""
    bind_temporary_server_to_process()
    if "PREFECT_FLOWS_HEARTBEAT_FREQUENCY" in os.environ:
        yield
        return
    owner = threading.current_thread()
    with ExitStack() as stack:

        def heartbeat_setting(_: ModuleType) -> None:
            if threading.current_thread() is not owner:
                return  # a settings context entered in another thread cannot be left here
            from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

            from tasks_lib.settings import get_settings

            stack.enter_context(temporary_settings(updates={
                PREFECT_FLOWS_HEARTBEAT_FREQUENCY: get_settings().flow_heartbeat_s}))

        cancel = after_import("prefect", heartbeat_setting)
        try:
            yield
        finally:
            cancel()


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
_SERVER_OUTPUT: list[Callable[[], IO[str] | None]] = []
"""Where the temporary server's stdout and stderr go (set by :func:`route_console_logs`; None:
this process's own)."""


def watched_server_args(args: Sequence[str], parent_pid: int) -> list[str]:
    """``[python, -m, uvicorn, ARGS…]`` → the same server under :data:`PARENT_WATCHDOG`; any
    other command unchanged."""
    args = list(args)
    if args[1:3] == ["-m", "uvicorn"]:
        return [args[0], "-c", PARENT_WATCHDOG, str(parent_pid), *args[3:]]
    return args


def server_output() -> IO[str] | None:
    """Where a temporary server's output goes: the command's log (None: this process's own
    streams; see :func:`route_console_logs`)."""
    return _SERVER_OUTPUT[-1]() if _SERVER_OUTPUT else None


class _ParentBoundSubprocess:
    """The ``subprocess`` module as Prefect's server module sees it: ``Popen`` of the uvicorn
    server goes through :data:`PARENT_WATCHDOG` (Prefect's own arguments and environment are
    kept) and writes to the console log when one is set; everything else is the real module."""

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)

    @staticmethod
    def Popen(args: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        watched = watched_server_args(args, os.getpid())
        out = server_output() if watched != list(args) else None
        if out is not None and "stderr" not in kwargs:
            kwargs = {**kwargs, "stdout": out, "stderr": out}
        return subprocess.Popen(watched, **kwargs)


def _bind(module: ModuleType) -> None:
    from prefect.settings import PREFECT_API_URL

    if not PREFECT_API_URL.value():  # a named server is not started here
        module.subprocess = _ParentBoundSubprocess()  # type: ignore[attr-defined]


def bind_temporary_server_to_process() -> None:
    """Make a temporary Prefect server this process starts stop when this process dies.

    No-op when ``PREFECT_API_URL`` names a server (none is started). Idempotent; lasts for the
    rest of the process.
    """
    after_import(_SERVER_MODULE, _bind)


class _SharedTLS:
    """The ``ssl`` module as Prefect's API clients see it: ``create_default_context(cafile=F)``
    answers the context it made for ``F`` before (while ``F`` is unchanged) instead of a new
    one; everything else, the unverified context of ``PREFECT_API_TLS_INSECURE_SKIP_VERIFY``
    (made without ``cafile``, then changed by Prefect) included, is the real module."""

    def __init__(self) -> None:
        self._made: dict[tuple[str, int, int], ssl.SSLContext] = {}
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        import ssl  # imported by then: Prefect's client module imports it

        return getattr(ssl, name)

    def create_default_context(self, purpose: ssl.Purpose | None = None, *,
                               cafile: str | None = None, capath: str | None = None,
                               cadata: str | bytes | None = None) -> ssl.SSLContext:
        import ssl

        purpose = purpose or ssl.Purpose.SERVER_AUTH
        if cafile is None or capath is not None or cadata is not None \
                or purpose != ssl.Purpose.SERVER_AUTH:
            return ssl.create_default_context(purpose, cafile=cafile, capath=capath,
                                              cadata=cadata)
        stat = os.stat(cafile)
        key = (os.path.abspath(cafile), stat.st_mtime_ns, stat.st_size)
        with self._lock:
            if key not in self._made:
                self._made[key] = ssl.create_default_context(cafile=cafile)
            return self._made[key]

    def clear(self) -> None:
        """Forget the contexts made so far (tests)."""
        with self._lock:
            self._made.clear()


SHARED_TLS = _SharedTLS()
"""What :func:`share_api_tls_contexts` gives Prefect's client module for ``ssl``."""


def _share_tls(module: ModuleType) -> None:
    module.ssl = SHARED_TLS  # type: ignore[attr-defined]


def share_api_tls_contexts() -> None:
    """Let Prefect's API clients in this process share one verified TLS context per CA file.

    Prefect builds a new one for every client it opens (``ssl.create_default_context(cafile=
    certifi.where())``: ~150 certificates parsed, 18 ms on a 2-core machine), and it opens one
    per flow run, per deployment applied, per task-run submission, even for a plain
    ``http://`` server: a profile of the QA, MedBench and ops tests found 13 % of the test
    process's CPU there. A shared context is what httpx recommends; Prefect does not change a
    verified context after making it, and its clients in one process agree on HTTP/2
    (``PREFECT_API_ENABLE_HTTP2``), so the ALPN protocols httpcore sets on it per connection
    are the same for all of them. Idempotent; applied when Prefect's client module is
    imported (a command that never imports Prefect pays nothing). Called by the composition
    roots (:func:`flows.compose`, the tests' conftest)."""
    after_import("prefect.client.orchestration", _share_tls)


class ConsoleLog:
    """One command's log file, ``<folder>/cli-<time>-<pid>.log``, created at the first write
    (the newest :attr:`KEEP` files of the folder are kept)."""

    KEEP = 50

    def __init__(self, folder: Callable[[], Path]) -> None:
        self._folder = folder
        self._stream: IO[str] | None = None
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        """The file (created, with its folder, on first use)."""
        return Path(self.stream().name)

    def stream(self) -> IO[str]:
        """The open file, line-buffered, appended to."""
        with self._lock:
            if self._stream is None:
                folder = self._folder()
                folder.mkdir(parents=True, exist_ok=True)
                for old in sorted(folder.glob("cli-*.log"))[:-self.KEEP]:
                    old.unlink(missing_ok=True)
                name = f"cli-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.log"
                self._stream = (folder / name).open("a", buffering=1, encoding="utf-8")
            return self._stream

    def record(self, exc: BaseException) -> Path:
        """Append ``exc``'s traceback; the file's path."""
        stream = self.stream()
        stream.write("".join(traceback.format_exception(exc)))
        stream.flush()
        return self.path


def _is_console(handler: logging.Handler) -> bool:
    stream = getattr(handler, "stream", None)
    return (isinstance(handler, logging.StreamHandler) and not isinstance(handler, _ToLog)
            and stream in (sys.stderr, sys.stdout, sys.__stderr__, sys.__stdout__))


class _ToLog(logging.StreamHandler):  # type: ignore[type-arg]
    """A console handler moved to a :class:`ConsoleLog` (same level and format; the file is
    created by the first record) or kept on stderr for some records."""

    def __init__(self, log: ConsoleLog | None = None) -> None:
        super().__init__(sys.stderr)
        self._log = log

    def emit(self, record: logging.LogRecord) -> None:
        if self._log is not None:
            self.stream = self._log.stream()
            self._log = None
        super().emit(record)


def _run_warning(record: logging.LogRecord) -> bool:
    """A warning of a flow or a step (or of a library, not Prefect's own), with no traceback."""
    ours = not record.name.startswith("prefect") or record.name.startswith(
        ("prefect.flow_runs", "prefect.task_runs"))
    return record.levelno == logging.WARNING and record.exc_info is None and ours


def _reroute(log: ConsoleLog) -> None:
    """Move every console handler of the configured loggers to ``log``; the root logger's keeps
    the warnings of flows and steps on stderr."""
    root = logging.getLogger()
    loggers = [root, *(lg for lg in logging.Logger.manager.loggerDict.values()
                       if isinstance(lg, logging.Logger))]
    for logger in loggers:
        for handler in [h for h in logger.handlers if _is_console(h)]:
            moved = _ToLog(log)
            moved.setLevel(handler.level)
            moved.setFormatter(handler.formatter)
            logger.removeHandler(handler)
            logger.addHandler(moved)
            if logger is root:
                warnings = _ToLog()
                warnings.setFormatter(handler.formatter)
                warnings.addFilter(_run_warning)
                logger.addHandler(warnings)


def route_console_logs(log: ConsoleLog, when: Callable[[], bool] = lambda: True) -> None:
    """For the rest of this process (its exit included, when the temporary server stops), send
    Prefect's console output — its log handlers on stderr, the temporary server's output — and
    the tracebacks of background threads to ``log``, if ``when()`` holds once Prefect configures
    its logging (``--debug`` asks it not to)."""

    def wrap(module: ModuleType) -> None:
        setup = getattr(module, "setup_logging")  # noqa: B009  (a module known at run time)

        def setup_then_reroute(*args: Any, **kwargs: Any) -> Any:
            config = setup(*args, **kwargs)
            if when():
                _reroute(log)
            return config

        setattr(module, "setup_logging", setup_then_reroute)  # noqa: B010
        if getattr(module, "PROCESS_LOGGING_CONFIG", None) and when():
            _reroute(log)

    def server_output() -> IO[str] | None:
        return log.stream() if when() else None

    thread_hook, unraisable_hook = threading.excepthook, sys.unraisablehook

    def thread_exception(args: threading.ExceptHookArgs) -> None:
        if not when() or args.exc_value is None:
            thread_hook(args)
        else:
            log.stream().write(f"Exception in thread {getattr(args.thread, 'name', '?')}:\n"
                               + "".join(traceback.format_exception(args.exc_value)))

    def unraisable(args: Any) -> None:
        if not when() or args.exc_value is None:
            unraisable_hook(args)
        else:
            log.stream().write(f"Exception ignored in {args.object!r}:\n"
                               + "".join(traceback.format_exception(args.exc_value)))

    _SERVER_OUTPUT.append(server_output)
    threading.excepthook, sys.unraisablehook = thread_exception, unraisable
    after_import("prefect.logging.configuration", wrap)
