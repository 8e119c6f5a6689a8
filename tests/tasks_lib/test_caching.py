"""Cached steps recompute when a helper module, a data file or a version they depend on changes,
and stay cache hits when nothing changed (under the Prefect test harness).

Module changes are made on temporary copies: the module's ``__file__`` is pointed at an edited
copy (the policy hashes ``module.__file__``), so the working tree is never modified.
"""

from __future__ import annotations

import importlib
import re
import sys
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prefect import Task, flow, task

from tasks_lib.agents import replay_agent
from tasks_lib.caching import as_data, cached, clear_digest_memo
from tasks_lib.qa.pool import FILES, pool_files, public_view, reference
from tasks_lib.qa.types import PoolManifest, QAItem
from tasks_lib.settings import get_settings, reset_settings
from tasks_lib.storage import Storage

pytestmark = pytest.mark.usefixtures("prefect_harness")
RECOMPUTED_THEN_HIT = ["Completed", "Cached", "Completed", "Cached"]
_calls: list[int] = []


@pytest.fixture(autouse=True)
def _fresh_memo() -> Iterator[None]:
    clear_digest_memo()
    yield
    clear_digest_memo()


def _in_flow(script: Callable[[], list[str]]) -> list[str]:
    """Run ``script`` inside one flow run (one run keeps the test fast)."""

    @flow(name="caching-probe")
    def probe() -> list[str]:
        return script()

    return probe()


def _name(step: Task[..., Any], **kwargs: Any) -> str:
    """Run ``step`` once: ``Cached`` for a cache hit, ``Completed`` when it computed."""
    return str(step(**kwargs, return_state=True).name)


def _around(run: Callable[[], str], change: Callable[[], None]) -> list[str]:
    """State names of two runs, then ``change()``, then two more runs."""
    before = [run(), run()]
    change()
    return [*before, run(), run()]


def _redirect(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, module_name: str,
              edit: Callable[[str], str]) -> Callable[[], None]:
    """A change that points ``module_name.__file__`` at an edited copy of its source."""
    module = importlib.import_module(module_name)

    def change() -> None:
        original = Path(str(module.__file__)).read_text(encoding="utf-8")
        edited = edit(original)
        assert edited != original
        copy = tmp_path / f"{module_name}.edited.py"
        copy.write_text(edited, encoding="utf-8")
        monkeypatch.setattr(module, "__file__", str(copy))

    return change


def _append(line: str) -> Callable[[str], str]:
    return lambda source: f"{source}\n{line}\n"


def _items(tag: str) -> list[QAItem]:
    return [QAItem(dataset=tag, realidx="1", line=1, answer_idx="B", answer="Heparin",
                   question="Dr. Smith saw the patient on 03/14/2015. Best anticoagulant?",
                   options={"A": "Aspirin", "B": "Heparin"})]


# --- (a) a de-identification rule -------------------------------------------------------------


def test_deid_rule_change_recomputes_deidentify(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    from tasks_lib.qa.steps import deidentify

    tag = f"cache-{uuid.uuid4().hex[:8]}"
    change = _redirect(monkeypatch, tmp_path, "tasks_lib.qa.deid",
                       _append("# new rule: bare 'Patient <Name>' is a name"))

    def script() -> list[str]:
        def run() -> str:
            return _name(deidentify, dataset=tag, items=_items(tag))

        states = _around(run, change)
        monkeypatch.undo()  # the rules are back as they were: the first result is still cached
        return [*states, run()]

    assert _in_flow(script) == [*RECOMPUTED_THEN_HIT, "Cached"]


def test_change_in_the_steps_own_module_recomputes(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    from tasks_lib.qa.steps import deidentify

    tag = f"cache-{uuid.uuid4().hex[:8]}"
    change = _redirect(monkeypatch, tmp_path, "tasks_lib.qa.steps",
                       _append("# a helper beside the step changed"))
    states = _in_flow(lambda: _around(
        lambda: _name(deidentify, dataset=tag, items=_items(tag)), change))
    assert states == RECOMPUTED_THEN_HIT


# --- (b) a prompt and (c) the answer extractor: the real execute_chunk step ------------------


@pytest.fixture
def replay_pool(tmp_path: Path) -> dict[str, Any]:
    """A one-item pool and a replay agent with one recorded answer: ``execute_chunk`` kwargs
    (replays are result-cached; live agents resume through the call cache instead)."""
    items = _items("medqa")
    root = Storage(str(tmp_path / "pool"))
    root.write_jsonl(FILES["public_items"], [public_view(it) for it in items])
    root.write_jsonl(FILES["references"], [reference(it) for it in items])
    root.write_jsonl(FILES["exemplars"], [])
    digest = pool_files([public_view(it) for it in items], [reference(it) for it in items],
                        []).digest
    root.write_json("manifest.json", PoolManifest(
        pool_id="cache-probe", version=1, content_hash=digest, created_at=datetime.now(UTC),
        track="qa", selection={}, datasets={}, deid={}, deid_items=[], meld={}, review=None,
        files=FILES))
    predictions = tmp_path / "replay.csv"
    predictions.write_text(
        "dataset,split,model,method,realidx,predicted_answer,prompt_tokens,completion_tokens,"
        "time_s,cost_usd\nmedqa,test,m,zero_shot,1,B,10,2,0.5,\n")
    agent = replay_agent("m", "zero_shot", str(predictions))
    from tasks_lib.qa.run_steps import QAEnvironment

    return {"env": QAEnvironment.open(root.root_url), "agent": agent, "replicate": 0,
            "start": 0, "stop": 1}


def _execute_states(pool: dict[str, Any], change: Callable[[], None]) -> list[str]:
    from tasks_lib.execution.steps import chunk_step

    step = chunk_step(pool["env"], pool["agent"])  # replays: result-cached
    return _in_flow(lambda: _around(lambda: _name(step, **pool), change))


def _edit_cot_prompt(source: str) -> str:
    edited, n = re.subn(r"^COT = .*$", 'COT = "Reason it through, then end with (X)."', source,
                        flags=re.MULTILINE)
    assert n == 1
    return edited


def test_prompt_change_recomputes_execute_chunk(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                replay_pool: dict[str, Any]) -> None:
    change = _redirect(monkeypatch, tmp_path, "tasks_lib.qa.method_base", _edit_cot_prompt)
    assert _execute_states(replay_pool, change) == RECOMPUTED_THEN_HIT


def test_answer_extractor_change_recomputes_execute_chunk(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, replay_pool: dict[str, Any]) -> None:
    change = _redirect(monkeypatch, tmp_path, "evaluators.qa",
                       _append("# rule 6: a trailing bare letter counts as the answer"))
    assert _execute_states(replay_pool, change) == RECOMPUTED_THEN_HIT


def test_price_snapshot_change_recomputes_execute_chunk(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, replay_pool: dict[str, Any]) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_bytes(get_settings().price_snapshot.read_bytes())
    monkeypatch.setenv("MEDFLOWS_PRICE_SNAPSHOT", str(prices))
    reset_settings()

    def change() -> None:
        prices.write_text(prices.read_text() + "# repriced\n")
        clear_digest_memo()  # as a fresh process would see it

    try:
        states = _execute_states(replay_pool, change)
    finally:
        monkeypatch.undo()
        reset_settings()
    assert states == RECOMPUTED_THEN_HIT


# --- (d) an evaluator version and data files: steps declared here ----------------------------


def _double(x: int) -> int:
    _calls.append(x)
    return 2 * x


def _step(**declared: Any) -> Task[[int], int]:
    """``_double`` as a cached step with the given declarations."""
    return task(name="double", **cached(**declared))(_double)


def test_evaluator_version_change_recomputes() -> None:
    x = int(uuid.uuid4().int % 10**9)
    _calls.clear()
    steps = [_step(versions=(v,)) for v in ("qa-exact-match/1", "qa-exact-match/2")]
    states = _in_flow(lambda: [_name(steps[i // 2], x=x) for i in range(4)])
    assert states == RECOMPUTED_THEN_HIT
    assert _calls == [x, x]  # the step body ran exactly for the two "Completed" runs


def test_data_file_missing_then_changed(tmp_path: Path) -> None:
    rubric = tmp_path / "rubric.yaml"
    step = _step(files=(rubric,))
    x = int(uuid.uuid4().int % 10**9)

    def script() -> list[str]:
        states = [_name(step, x=x), _name(step, x=x)]  # a missing file is a marker, no crash
        rubric.write_text("criteria: [accuracy]\n")
        clear_digest_memo()
        states += [_name(step, x=x)]
        rubric.write_text("criteria: [accuracy, safety]\n")
        states += [_name(step, x=x)]  # digests are computed once per process
        clear_digest_memo()  # a fresh process sees the edit
        return [*states, _name(step, x=x), _name(step, x=x)]

    assert _in_flow(script) == ["Completed", "Cached", "Completed", "Cached", "Completed",
                                "Cached"]


# --- declarations are checked when the step is defined ----------------------------------------


@pytest.mark.parametrize(("declared", "message"), [
    ({"modules": ("tasks_lib.qa.no_such_module",)}, "cannot find a source file"),
    ({"modules": ("no_such_package.deid",)}, "cannot find a source file"),
    ({"modules": (sys,)}, "no source file"),
    ({"files": ("datasets/prices.yaml",)}, "must be an absolute path"),
    ({"settings_files": ("judge_model",)}, "not a path setting; known: .*data_root"),
])
def test_bad_declarations_fail_at_definition(declared: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        cached(**declared)


def test_no_declarations_still_caches_on_inputs_and_source() -> None:
    x = int(uuid.uuid4().int % 10**9)
    step = _step()
    states = _in_flow(lambda: [_name(step, x=x), _name(step, x=x + 1), _name(step, x=x)])
    assert states == ["Completed", "Completed", "Cached"]


# --- big arguments are passed as data, not walked -----------------------------------------------


def _identity_of(items: list[QAItem], tag: str) -> int:
    return id(items)


def test_as_data_skips_prefects_walk_and_keeps_the_cache_key(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import prefect.utilities.collections as collections

    step = task(name="as-data-probe", **cached())(_identity_of)
    items, tag = _items("walk") * 300, uuid.uuid4().hex
    visits = [0]
    walk = collections.visit_collection

    def counted(*args: Any, **kwargs: Any) -> Any:
        visits[0] += 1
        return walk(*args, **kwargs)

    monkeypatch.setattr(collections, "visit_collection", counted)  # its recursion goes here

    def visited(**kwargs: Any) -> tuple[str, int, int]:
        visits[0] = 0
        state = step(**kwargs, return_state=True)
        return str(state.name), state.result(), visits[0]

    def script() -> list[tuple[str, int, int]]:
        return [visited(items=items, tag=tag), visited(items=as_data(items), tag=tag),
                visited(items=as_data(items), tag=tag + "-2")]

    (plain, plain_id, plain_visits), (again, _, _), (quoted, quoted_id, quoted_visits) = \
        _in_flow(script)
    assert (plain, again, quoted) == ("Completed", "Cached", "Completed")  # the same key
    assert plain_id == quoted_id == id(items)  # the step got the list itself
    assert plain_visits > 2 * len(items) and quoted_visits < 10
