"""Kits kept outside the tree (``MEDFLOWS_KIT_MODULES``, issue 22): an entry is a module name or
the path of a ``.py`` file or package folder; importing it registers its kit; the evaluator
sandbox gets the same modules read-only; a bad entry is one line naming the setting, and the
``medflows`` command stops with it (exit 2). The toy track's research cell scored in the
evaluator sandbox through this setting is tests/flows/test_toy_track.py."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from evaluators.core import InputDataError
from tasks_lib.settings import Settings
from tasks_lib.tracks.base import KITS
from tasks_lib.tracks.extra import register_extra_kits, resolve, sandbox_view

KIT_SOURCE = '''
from pathlib import Path

from evaluators.core import Track
from tasks_lib.tracks.base import KITS, TrackKit


class OutsideKit(TrackKit):
    track = Track("{name}")
    evaluator_version = "outside-1"
    supported_metrics = ()

    def score(self, run, submission):
        raise NotImplementedError

    def baselines(self, pool_url, out):
        return []


KITS.add("{name}", OutsideKit())
'''


@pytest.fixture(autouse=True)
def _registry() -> Iterator[None]:
    """The kit registry and the imported modules as before each test."""
    modules = set(sys.modules)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(KITS, "_entries", dict(KITS._entries))
        yield
    for name in set(sys.modules) - modules:
        if name.startswith(("outside_", "ext_pkg")):
            del sys.modules[name]


def test_a_py_file_registers_its_kit(tmp_path: Path) -> None:
    path = tmp_path / "outside_file.py"
    path.write_text(KIT_SOURCE.format(name="outside_file"))
    [src] = register_extra_kits([str(path)])
    assert (src.module, src.files, src.by_path) == ("outside_file", path, True)
    assert KITS.get("outside_file").evaluator_version == "outside-1"
    register_extra_kits([str(path)])  # imported once: registering again would fail


def test_a_package_folder_registers_its_kit_with_relative_imports(tmp_path: Path) -> None:
    package = tmp_path / "ext_pkg"
    package.mkdir()
    (package / "kit.py").write_text(KIT_SOURCE.format(name="outside_pkg"))
    (package / "__init__.py").write_text("from . import kit as kit\n")
    register_extra_kits([f"{package}/"])
    assert "outside_pkg" in KITS.names()


def test_a_module_name_registers_its_kit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "outside_mod").mkdir()
    (tmp_path / "outside_mod" / "__init__.py").write_text("")
    (tmp_path / "outside_mod" / "wound.py").write_text(KIT_SOURCE.format(name="outside_mod"))
    monkeypatch.syspath_prepend(str(tmp_path))
    [src] = register_extra_kits(["outside_mod.wound"])
    assert (src.files, src.by_path) == (tmp_path / "outside_mod", False)
    assert "outside_mod" in KITS.names()
    view = sandbox_view(["outside_mod.wound"])
    assert view.binds == [tmp_path / "outside_mod"]
    assert view.env == {"MEDFLOWS_KIT_MODULES": "outside_mod.wound",
                        "PYTHONPATH": str(tmp_path)}


def test_the_sandbox_gets_absolute_paths_and_nothing_when_unset(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "outside_rel.py").write_text("")
    monkeypatch.chdir(tmp_path)
    view = sandbox_view(["./outside_rel.py"])
    assert view.binds == [tmp_path / "outside_rel.py"]
    assert view.env == {"MEDFLOWS_KIT_MODULES": str(tmp_path / "outside_rel.py")}
    assert sandbox_view([]) == ([], {})


def test_the_setting_is_a_comma_separated_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEDFLOWS_KIT_MODULES", "a.b, /x/kit.py ,")
    assert Settings().kit_modules == ["a.b", "/x/kit.py"]
    monkeypatch.delenv("MEDFLOWS_KIT_MODULES")
    assert Settings().kit_modules == []


@pytest.mark.parametrize(("entry", "says"), [
    ("nope_kits.wound", "MEDFLOWS_KIT_MODULES: nope_kits.wound: no module named 'nope_kits' "
                        "is importable"),
    ("/no/such/kit.py", "MEDFLOWS_KIT_MODULES: /no/such/kit.py: no such .py file or package "
                        "folder (a folder holding __init__.py)"),
    ("my kits", "MEDFLOWS_KIT_MODULES: 'my kits': neither a module name nor a path of a .py "
                "file or package folder"),
])
def test_a_bad_entry_is_one_line_naming_the_setting(entry: str, says: str) -> None:
    with pytest.raises(InputDataError) as err:
        resolve(entry)
    assert str(err.value) == says


def test_a_missing_submodule_names_the_setting() -> None:
    with pytest.raises(InputDataError, match=r"^MEDFLOWS_KIT_MODULES: tasks_lib\.no_such_kit: "
                                             r"No module named 'tasks_lib\.no_such_kit'$"):
        register_extra_kits(["tasks_lib.no_such_kit"])


def test_medflows_stops_with_one_error_line(tmp_path: Path) -> None:
    env = {**os.environ, "MEDFLOWS_KIT_MODULES": str(tmp_path / "missing_kit.py")}
    got = subprocess.run([str(Path(sys.executable).parent / "medflows"), "--help"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert got.returncode == 2, got.stderr
    assert got.stderr.strip().splitlines() == [
        f"error: MEDFLOWS_KIT_MODULES: {tmp_path / 'missing_kit.py'}: no such .py file or "
        "package folder (a folder holding __init__.py)"]
