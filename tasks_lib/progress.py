"""Progress of long work, for whoever watches this process (the CLI's progress bar).

Steps publish :class:`~tasks_lib.qa.runner.RunProgress`-like reports with :func:`publish`; a
front end subscribes with :func:`listening`. Steps that run in another process (a Dask worker)
publish to nobody there: the flow's Prefect progress artifact is the view that spans machines.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Listener = Callable[[Any], None]

_LISTENERS: list[Listener] = []
_LOCK = threading.Lock()


def publish(report: Any) -> None:
    """Hand ``report`` to every listener of this process (a listener's error is not ours)."""
    with _LOCK:
        listeners = list(_LISTENERS)
    for listener in listeners:
        listener(report)


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Receive every report published while the block runs."""
    with _LOCK:
        _LISTENERS.append(listener)
    try:
        yield
    finally:
        with _LOCK:
            _LISTENERS.remove(listener)
