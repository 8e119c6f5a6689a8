"""Step options shared by every expensive deterministic step.

Cache on inputs + step source (never the run id, which Prefect's default policy includes), and
persist results in a local folder, so re-running a failed flow run resumes at the failed step.

Prefect's ``TASK_SOURCE`` hashes only the step function's own lines, so a step also declares what
else its result depends on (:class:`Dependencies`): the helper modules it calls (their whole
source files), the data files it reads (rules, prompts, rubrics, price snapshots) and version
strings (``EVALUATOR_VERSION``). The module that defines the step is always included. Changing any
of them changes the cache key, so the next run recomputes instead of returning a stale result.

Digests are computed once per process per file (:func:`clear_digest_memo` forgets them): the
module code a process runs is the code it imported, and loaders such as the price snapshot also
read their file once per process, so a file edited while a process runs is seen by the next one.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar, cast

from prefect.cache_policies import TASK_SOURCE, CachePolicy, Inputs
from prefect.context import TaskRunContext
from prefect.utilities.annotations import quote

from tasks_lib.settings import Settings, get_settings

ModuleRef = ModuleType | str
"""A helper module: the module object or its dotted name (``"tasks_lib.qa.deid"``)."""

FileRef = str | os.PathLike[str]
"""An absolute path of a data file a step reads."""

MISSING = "missing"
"""What a declared data file that does not exist contributes to the key."""


@cache
def _file_digest(path: str) -> str:
    """sha256 of a file's bytes, or :data:`MISSING` when there is no such file (memoised)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except FileNotFoundError:
        return MISSING


def clear_digest_memo() -> None:
    """Forget every memoised file digest (tests edit files inside one process)."""
    _file_digest.cache_clear()


def _module_file(name: str) -> str:
    """The source file of the (imported) module ``name``."""
    module = sys.modules.get(name) or importlib.import_module(name)
    file = getattr(module, "__file__", None)
    if not file:
        raise ValueError(f"module {name!r} has no source file to hash")
    return str(file)


def _module_name(ref: ModuleRef) -> str:
    """Dotted name of a declared module; fails now (not at run time) if it has no source file."""
    if isinstance(ref, ModuleType):
        if not getattr(ref, "__file__", None):
            raise ValueError(f"module {ref.__name__!r} has no source file to hash")
        return ref.__name__
    try:
        spec = importlib.util.find_spec(ref)
    except ModuleNotFoundError:
        spec = None
    if spec is None or not spec.has_location or not spec.origin:
        raise ValueError(f"cannot find a source file for module {ref!r}")
    return ref


def _file_path(ref: FileRef) -> str:
    path = Path(ref)
    if not path.is_absolute():
        raise ValueError(f"data file {str(ref)!r} must be an absolute path")
    return str(path)


def _settings_field(name: str) -> str:
    field = Settings.model_fields.get(name)
    if field is None or field.annotation is not Path:
        known = sorted(k for k, f in Settings.model_fields.items() if f.annotation is Path)
        raise ValueError(f"{name!r} is not a path setting; known: {', '.join(known)}")
    return name


def _step_module(task_ctx: TaskRunContext | None) -> str | None:
    """Name of the module that defines the running step, if it is a file we can hash."""
    fn = getattr(task_ctx.task, "fn", None) if task_ctx else None
    name = getattr(fn, "__module__", None)
    module = sys.modules.get(name) if isinstance(name, str) else None
    return name if module is not None and getattr(module, "__file__", None) else None


@dataclass
class Dependencies(CachePolicy):
    """Cache key part: digest of the step's module, helper modules, data files and versions."""

    modules: tuple[str, ...] = ()
    """Dotted names of helper modules whose whole source file is hashed."""
    files: tuple[str, ...] = ()
    """Absolute paths of data files whose bytes are hashed (a missing file is a marker)."""
    settings_files: tuple[str, ...] = ()
    """Names of path settings (``price_snapshot``) resolved when the key is computed."""
    versions: tuple[str, ...] = ()
    """Version strings of the logic the result depends on (``EVALUATOR_VERSION``)."""

    def compute_key(
        self,
        task_ctx: TaskRunContext,
        inputs: dict[str, Any],
        flow_parameters: dict[str, Any],
        **kwargs: Any,
    ) -> str | None:
        """sha256 over module source digests (by name), data file digests and versions."""
        step_module = _step_module(task_ctx)
        names = sorted({*self.modules, *([step_module] if step_module else [])})
        settings = get_settings()
        paths = [*self.files, *(str(getattr(settings, f)) for f in self.settings_files)]
        h = hashlib.sha256()
        for part in (
            *(f"module {n} {_file_digest(_module_file(n))}" for n in names),
            *(f"file {_file_digest(p)}" for p in paths),
            *(f"version {v}" for v in self.versions),
        ):
            h.update(part.encode() + b"\n")
        return h.hexdigest()


def dependencies(
    modules: Iterable[ModuleRef] = (),
    files: Iterable[FileRef] = (),
    settings_files: Iterable[str] = (),
    versions: Iterable[str] = (),
) -> Dependencies:
    """A :class:`Dependencies` policy; unknown modules, relative paths and settings fail now.

    Raises:
        ValueError: a module has no source file, a file path is relative, or a settings name is
            not a path setting.
    """
    return Dependencies(
        modules=tuple(sorted({_module_name(m) for m in modules})),
        files=tuple(_file_path(f) for f in files),
        settings_files=tuple(_settings_field(s) for s in settings_files),
        versions=tuple(versions),
    )


def cached(
    *,
    modules: Iterable[ModuleRef] = (),
    files: Iterable[FileRef] = (),
    settings_files: Iterable[str] = (),
    versions: Iterable[str] = (),
    ignore_inputs: Iterable[str] = (),
    **extra: Any,
) -> dict[str, Any]:
    """Keyword arguments for ``@task`` that make a step resumable across runs.

    The cache key covers the inputs, the step's source, the whole module defining the step and
    everything declared here.

    Args:
        modules: helper modules the step calls (module objects or dotted names).
        files: absolute paths of data files the step reads (rules, prompts, rubrics).
        settings_files: names of path settings the step reads (e.g. ``"price_snapshot"``).
        versions: version strings of the logic (e.g. ``EVALUATOR_VERSION``).
        ignore_inputs: parameters that do not decide the result (e.g. a start time that only
            feeds a wall-time figure), left out of the key.
        **extra: further ``@task`` options (e.g. :data:`IO_RETRIES`), which win on conflict.

    Returns:
        ``cache_policy``, ``persist_result`` and ``result_storage`` plus ``extra``.
    """
    results = get_settings().results_dir
    results.mkdir(parents=True, exist_ok=True)
    policy = dependencies(modules, files, settings_files, versions)
    return {
        "cache_policy": Inputs(exclude=list(ignore_inputs)) + TASK_SOURCE + policy,
        "persist_result": True,
        "result_storage": results,
        **extra,
    }


T = TypeVar("T")


def as_data(value: T) -> T:
    """``value`` as a step's argument that Prefect does not walk through.

    Before a step runs, Prefect walks each argument twice, element by element through lists,
    dicts, tuples and dataclasses: for futures and states to wait on, then to resolve them. For
    a list of a thousand QA items that took more CPU than the step itself (a profile of the QA,
    MedBench and ops tests: 18 % of the test process in that walk). Plain data holds no
    futures; wrapped in Prefect's ``quote``, the step receives ``value`` itself, and its cache
    key (computed from the resolved arguments) is the same as without."""
    return cast(T, quote(value))


def _retry_io_only(_task: Any, _run: Any, state: Any) -> bool:
    """Retry I/O faults, never the user's or the agent's mistakes (they would fail again)."""
    from evaluators.core import InputDataError, InvalidSubmissionError

    try:
        state.result()
    except (InputDataError, InvalidSubmissionError):
        return False
    except Exception:  # anything else may be a transient I/O fault
        return True
    return True


IO_RETRIES: dict[str, Any] = {"retries": 2, "retry_delay_seconds": [2, 10],
                              "retry_condition_fn": _retry_io_only}
"""Retries for I/O steps (model calls, storage, containers), never for pure computation and never
for a user's or an agent's mistake (``InputDataError``/``InvalidSubmissionError``)."""
