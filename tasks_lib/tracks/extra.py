"""Track kits kept outside the tree: the ``MEDFLOWS_KIT_MODULES`` setting.

Every composition root imports the shipped catalog (:mod:`tasks_lib.tracks.catalog`) and then
calls :func:`register_extra_kits`, which imports each configured module; importing a kit's
module registers it (``KITS.add`` or :func:`tasks_lib.imaging.registry.register`), exactly as a
shipped kit's module does. An entry is an importable module name (``my_org.kits.wound``) or the
path of a ``.py`` file or a package folder (one holding ``__init__.py``), imported under its
file or folder name without touching ``sys.path``.

The evaluator sandbox has none of the host's ``sys.path``: :func:`sandbox_view` gives the
folders to bind read-only inside it and the entries and ``PYTHONPATH`` that import the same
modules there (:mod:`tasks_lib.harness.evaluate`).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import NamedTuple

from evaluators.core import InputDataError
from tasks_lib.settings import get_settings

SETTING = "MEDFLOWS_KIT_MODULES"
"""The setting's environment variable (named by every error)."""


class KitSource(NamedTuple):
    """Where one configured kit module's code lives."""

    entry: str
    """The entry as configured."""
    module: str
    """The name it is imported under."""
    files: Path
    """Its code: the ``.py`` file or package folder of a path entry; the top-level package
    folder (or module file) of a module name."""
    by_path: bool
    """Configured as a path (imported from :attr:`files`), not as a module name."""


def _looks_like_path(text: str) -> bool:
    return "/" in text or "\\" in text or text.endswith(".py") or text.startswith(("~", "."))


def _from_path(entry: str) -> KitSource:
    path = Path(entry).expanduser().resolve()
    if path.is_file() and path.suffix == ".py":
        module = path.stem
    elif path.is_dir() and (path / "__init__.py").is_file():
        module = path.name
    else:
        raise InputDataError(SETTING, f"{entry}: no such .py file or package folder (a folder "
                                      "holding __init__.py)")
    if not module.isidentifier():
        raise InputDataError(SETTING, f"{entry}: {module!r} is not a module name")
    return KitSource(entry, module, path, True)


def resolve(entry: str) -> KitSource:
    """Where ``entry`` (a module name or a path) lives, without importing it.

    Raises:
        InputDataError: no such file, folder or importable top-level package (names the
            setting and the entry).
    """
    text = entry.strip()
    if _looks_like_path(text):
        return _from_path(text)
    if not text or not all(part.isidentifier() for part in text.split(".")):
        raise InputDataError(SETTING, f"{entry!r}: neither a module name nor a path of a .py "
                                      "file or package folder")
    top = text.split(".")[0]
    spec = importlib.util.find_spec(top)
    if spec is None or (spec.origin is None and not spec.submodule_search_locations):
        raise InputDataError(SETTING, f"{entry}: no module named {top!r} is importable")
    where = spec.submodule_search_locations
    files = Path(next(iter(where))) if where else Path(str(spec.origin))
    return KitSource(text, text, files.resolve(), False)


def _import_path(src: KitSource) -> None:
    loaded = sys.modules.get(src.module)
    if loaded is not None:
        origin = Path(getattr(loaded, "__file__", "") or "/").resolve()
        if origin == src.files or origin.parent == src.files:
            return
        raise InputDataError(SETTING, f"{src.entry}: a module named {src.module!r} is already "
                                      f"imported from {origin}; rename the file or folder")
    init = src.files / "__init__.py" if src.files.is_dir() else src.files
    spec = importlib.util.spec_from_file_location(
        src.module, init, submodule_search_locations=[str(src.files)] if src.files.is_dir()
        else None)
    if spec is None or spec.loader is None:
        raise InputDataError(SETTING, f"{src.entry}: not importable as {src.module}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[src.module] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[src.module]
        raise


def register_extra_kits(entries: list[str] | None = None) -> list[KitSource]:
    """Import every kit module of ``entries`` (default: the setting); importing one registers
    its kit, and a module imported before is not imported again.

    Raises:
        InputDataError: an entry names no file, folder or module (names the setting).
    """
    sources = [resolve(e) for e in (get_settings().kit_modules if entries is None else entries)]
    for src in sources:
        try:
            if src.by_path:
                _import_path(src)
            else:
                importlib.import_module(src.module)
        except ModuleNotFoundError as exc:
            raise InputDataError(SETTING, f"{src.entry}: {exc}") from None
    return sources


class SandboxView(NamedTuple):
    """What a sandbox needs to import the configured kits."""

    binds: list[Path]
    """Files and folders to bind read-only at the same path."""
    env: dict[str, str]
    """``MEDFLOWS_KIT_MODULES`` (paths absolute) and ``PYTHONPATH`` for module names."""


def sandbox_view(entries: list[str] | None = None) -> SandboxView:
    """The binds and environment that import ``entries`` (default: the setting) inside a
    sandbox as on the host (empty when none are configured)."""
    sources = [resolve(e) for e in (get_settings().kit_modules if entries is None else entries)]
    if not sources:
        return SandboxView([], {})
    roots = list(dict.fromkeys(str(s.files.parent) for s in sources if not s.by_path))
    env = {"MEDFLOWS_KIT_MODULES": ",".join(str(s.files) if s.by_path else s.module
                                            for s in sources)}
    if roots:
        env["PYTHONPATH"] = ":".join(roots)
    return SandboxView(list(dict.fromkeys(s.files for s in sources)), env)
