"""How fast does the ``medflows`` command answer, and how soon does ``execute qa`` make its first
model call? References: the bare interpreter (``python -c pass``), the floor no command can beat;
inspect_ai on the same items, server and connection limit; and the targets of issue 26
(``medflows --help`` within 1.0 s, the first model call of ``execute qa`` within 3 s and not
later than inspect_ai's).

Every command runs as a user types it (console script included), in a throwaway state folder
(its own ledger, storage, results, Prefect home and service records; no ``PREFECT_API_URL``), so
nothing an earlier command of the user's left behind helps:

* ``python_s``: ``python -c pass`` (the reference);
* ``help_s``: ``medflows --help``;
* ``help_imports_s``: the imports of ``medflows --help`` alone (``python -X importtime``: the sum
  of the top-level modules' cumulative times, one run);
* ``runs_list_s``: ``medflows runs list --json`` on the empty ledger (no Prefect, no kit);
* ``cold_first_call_s`` / ``cold_finish_s``: ``medflows execute qa --pool P --agents
  gpt-4o-mini@zero_shot --max-connections 16 --no-cache`` with no local server (Prefect's
  temporary server starts for the command): from the command's start to the first request the
  provider receives, and to the command's end;
* ``first_call_s`` / ``finish_s``: the same after ``medflows server start`` (the documented fast
  path, docs/operations.md: the command runs in a child of the warm process,
  :mod:`tasks_lib.warm_start`; the server is stopped at the end);
* ``inspect_first_call_s`` / ``inspect_finish_s``: ``inspect eval task.py --model openai/bench
  --max-connections 16`` over the same items (multiple choice, one call per item) in a
  throwaway venv with ``inspect-ai`` and ``openai`` from PyPI; skipped with a note when they
  cannot be installed (``--inspect-venv DIR`` reuses a venv that has them).

The pool is the one the issue measured: ``medflows pool build qa --per-dataset 25`` on the
embedded MedAgentsBench questions (225 items; built once, ~40 s, not measured). The provider is
the test suite's OpenAI-compatible server (``tests/support/openai_server.py``) in its own
process with L = 0.25 s per call; its request arrival times are ``time.monotonic()``, the
system-wide monotonic clock, so they compare with this process's. Each figure is the median of
``REPEATS`` (``EXEC_REPEATS`` for the executions); the machine's load average is printed with
each execution (``load_1m`` in the RESULT line: their mean; at the start when none ran): on a
busy machine every figure grows.

One function per measurement in :data:`MEASUREMENTS` (name → figures); the last line is
``RESULT python_s=… help_s=… … first_call_s=… inspect_first_call_s=… load_1m=…``.
Run: ``.venv/bin/python benchmarks/cli_startup.py`` (≈ 5 minutes); ``--quick`` measures the
commands without model calls only.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

REPEATS = 5
EXEC_REPEATS = 3
LATENCY_S = 0.25
CONNECTIONS = 16
PER_DATASET = 25
AGENT = "gpt-4o-mini@zero_shot"
PIP_TIMEOUT_S = 600
MEDFLOWS = str(Path(sys.executable).parent / "medflows")
TESTS = Path(__file__).resolve().parents[1] / "tests"


def state_env(folder: Path) -> dict[str, str]:
    """This environment with every medflows and Prefect state folder in ``folder``."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update({"MEDFLOWS_LEDGER_URL": f"sqlite:///{folder / 'ledger.db'}",
                "MEDFLOWS_STORAGE_URL": str(folder / "storage"),
                "MEDFLOWS_RESULTS_DIR": str(folder / "results"),
                "MEDFLOWS_SERVICES_DIR": str(folder / "services"),
                "MEDFLOWS_JUDGE_MODEL": "rules",  # the pool's exploit audit runs offline
                "PREFECT_HOME": str(folder / "prefect-home")})
    return env


def _reply(body: dict[str, object]) -> str:
    """A letter that depends on the question; medflows' answer extractor (a request with a
    ``response_format``) gets it as JSON, inspect_ai's template (``ANSWER: $LETTER``) its way."""
    prompt = str(body["messages"][-1]["content"])  # type: ignore[index]
    letter = "ABCD"[sum(map(ord, prompt)) % 4]
    if "response_format" in body:
        return json.dumps({"answer_idx": letter})
    return f"ANSWER: {letter}" if "ANSWER" in prompt else f"The answer is ({letter})."


def _serve(conn: Connection) -> None:
    """The provider process: answer ``"times"`` with the arrival times of the requests so far,
    until the benchmark says ``"stop"``."""
    sys.path.append(str(TESTS))
    from support.openai_server import FakeOpenAIServer

    with FakeOpenAIServer(_reply, latency=LATENCY_S) as srv:
        conn.send(srv.base_url)
        while conn.recv() == "times":
            conn.send(list(srv.request_times))


class Provider:
    """The provider process (its own interpreter lock, as a real provider) and the pipe to it."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("fork")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child,), daemon=True)
        self.process.start()
        self.base_url = str(self.conn.recv())

    def requests_since(self, started: float) -> list[float]:
        """Arrival times (``time.monotonic()``) of the requests received since ``started``."""
        self.conn.send("times")
        return [t for t in self.conn.recv() if t >= started]

    def stop(self) -> None:
        self.conn.send("stop")
        self.process.join(timeout=30)


@dataclass
class Bench:
    """What the measurements share: the state folder and its environment, the pool, the
    provider, the inspect_ai venv, and notes for the report."""

    folder: Path
    env: dict[str, str]
    inspect_venv: Path | None = None
    pool: Path | None = None
    provider: Provider | None = None
    notes: list[str] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)


def wall_s(argv: list[str], env: dict[str, str]) -> float:
    """Median wall time of ``REPEATS`` runs of ``argv`` (each must succeed)."""
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=600)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def python_s(bench: Bench) -> dict[str, float]:
    """The bare interpreter: the reference."""
    return {"python_s": wall_s([sys.executable, "-c", "pass"], bench.env)}


def help_s(bench: Bench) -> dict[str, float]:
    """``medflows --help``."""
    return {"help_s": wall_s([MEDFLOWS, "--help"], bench.env)}


def help_imports_s(bench: Bench) -> dict[str, float]:
    """What ``medflows --help`` spends importing (``-X importtime``, top-level modules)."""
    program = "import sys\nsys.argv = ['medflows', '--help']\nfrom flows.cli import main\nmain()"
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", program], env=bench.env,
                          capture_output=True, text=True, timeout=600, check=False)
    top = re.findall(r"^import time:\s+\d+ \|\s+(\d+) \| \S", done.stderr, re.MULTILINE)
    return {"help_imports_s": sum(int(us) for us in top) / 1e6}


def runs_list_s(bench: Bench) -> dict[str, float]:
    """``medflows runs list --json`` on an empty ledger."""
    return {"runs_list_s": wall_s([MEDFLOWS, "runs", "list", "--json"], bench.env)}


def _checked(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> str:
    """Run ``argv`` (in ``cwd``); its stdout (a failure ends the benchmark with its stderr's
    tail)."""
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=900,
                          check=False)
    if done.returncode:
        raise SystemExit(f"{' '.join(argv[:4])} … failed ({done.returncode}):\n"
                         f"{done.stderr[-3000:]}")
    return done.stdout


def _pool(bench: Bench) -> Path:
    """The 225-item pool (built on first use)."""
    if bench.pool is None:
        bench.pool = bench.folder / "pool"
        _checked([MEDFLOWS, "pool", "build", "qa", "--per-dataset", str(PER_DATASET),
                  "--no-meld", "--auto-approve", "--out", str(bench.pool)], bench.env)
    return bench.pool


def _provider(bench: Bench) -> Provider:
    if bench.provider is None:
        bench.provider = Provider()
    return bench.provider


def first_call(bench: Bench, argv: list[str], env: dict[str, str], label: str,
               cwd: Path | None = None, before: Callable[[], None] = lambda: None
               ) -> tuple[float, float]:
    """Medians over ``EXEC_REPEATS`` runs of ``argv`` (in ``cwd``; ``before()`` first, not
    timed): seconds from its start to the first request the provider received, and to its
    end."""
    provider = _provider(bench)
    firsts, finishes = [], []
    for _ in range(EXEC_REPEATS):
        before()
        started = time.monotonic()
        _checked(argv, env, cwd)
        ended = time.monotonic()
        arrivals = provider.requests_since(started)
        if not arrivals:
            raise SystemExit(f"{label}: the provider received no request")
        firsts.append(min(arrivals) - started)
        finishes.append(ended - started)
        bench.loads.append(os.getloadavg()[0])
        print(f"  {label}: first call {firsts[-1]:.2f} s, done {finishes[-1]:.2f} s, "
              f"{len(arrivals)} requests (load {os.getloadavg()[0]:.1f})", flush=True)
    return statistics.median(firsts), statistics.median(finishes)


def _execute_qa(bench: Bench) -> tuple[list[str], dict[str, str]]:
    """``medflows execute qa`` of the zero-shot agent on the pool, against the provider."""
    env = {**bench.env, "MEDFLOWS_LLM_API_BASE": _provider(bench).base_url,
           "OPENAI_API_KEY": "bench"}
    return [MEDFLOWS, "execute", "qa", "--pool", str(_pool(bench)), "--agents", AGENT,
            "--max-connections", str(CONNECTIONS), "--no-cache", "--no-progress"], env


def cold_execute(bench: Bench) -> dict[str, float]:
    """``execute qa`` with no local server: Prefect's temporary server starts for it."""
    argv, env = _execute_qa(bench)
    first, finish = first_call(bench, argv, env, "medflows (cold)")
    return {"cold_first_call_s": first, "cold_finish_s": finish}


def warm_execute(bench: Bench) -> dict[str, float]:
    """``execute qa`` after ``medflows server start`` (stopped afterwards)."""
    argv, env = _execute_qa(bench)
    _checked([MEDFLOWS, "server", "start"], bench.env)  # returns once the warm process listens
    try:
        first, finish = first_call(bench, argv, env, "medflows (local server)",
                                   before=lambda: _listening(bench.folder / "services"))
    finally:
        _checked([MEDFLOWS, "server", "stop"], bench.env)
    log = bench.folder / "services" / "warm.log"
    refused = log.read_text().count("refused a command") if log.exists() else 0
    if refused or not log.exists():
        bench.notes.append(f"{refused} of the local-server runs did not start warm (the warm "
                           f"process refused them: a source file changed meanwhile?)")
    return {"first_call_s": first, "finish_s": finish}


def _listening(services: Path, timeout_s: float = 300) -> None:
    """Until the warm process listens (it imports afresh for a while after a source file
    changed: a run then would not start warm)."""
    deadline = time.monotonic() + timeout_s
    while not (services / "warm.sock").exists() and time.monotonic() < deadline:
        time.sleep(0.2)


INSPECT_TASK = '''
import json
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import choice
from inspect_ai.solver import multiple_choice


@task
def pool_qa():
    rows = json.loads((Path(__file__).parent / "samples.json").read_text())
    return Task(dataset=[Sample(**row) for row in rows], solver=multiple_choice(),
                scorer=choice())
'''
"""The inspect_ai task: the pool's items as multiple-choice samples (one model call each)."""


def _inspect_task(bench: Bench) -> Path:
    """The task file and its samples (the pool's public items, targets from its references)."""
    pool = _pool(bench)
    refs = {(r["dataset"], r["realidx"]): r["answer_idx"] for r in map(
        json.loads, (pool / "private" / "references.jsonl").read_text().splitlines())}
    samples = []
    for item in map(json.loads, (pool / "public" / "items.jsonl").read_text().splitlines()):
        letters = sorted(item["options"])
        samples.append({"input": item["question"], "choices": [item["options"][k] for k in letters],
                        "target": refs[(item["dataset"], item["realidx"])],
                        "id": f"{item['dataset']}/{item['realidx']}"})
    folder = bench.folder / "inspect-task"
    folder.mkdir(exist_ok=True)
    (folder / "samples.json").write_text(json.dumps(samples))
    (folder / "task.py").write_text(INSPECT_TASK)
    return folder / "task.py"


def _inspect_venv(bench: Bench) -> Path | None:
    """A venv with inspect-ai and openai (installed now unless given); None when it cannot be
    had (noted)."""
    if bench.inspect_venv is not None:
        return bench.inspect_venv
    venv = bench.folder / "inspect-venv"
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300,
                       capture_output=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
                        "inspect-ai", "openai"], check=True, timeout=PIP_TIMEOUT_S,
                       capture_output=True)
    except (OSError, subprocess.SubprocessError) as exc:
        why = getattr(exc, "stderr", None) or str(exc)
        why = why.decode(errors="replace") if isinstance(why, bytes) else str(why)
        bench.notes.append(f"inspect_ai not measured: cannot install it ({why.strip()[-300:]})")
        return None
    bench.inspect_venv = venv
    return venv


def inspect_execute(bench: Bench) -> dict[str, float]:
    """``inspect eval`` of the same items, same provider, same connection limit."""
    venv = _inspect_venv(bench)
    if venv is None:
        return {}
    task = _inspect_task(bench)
    env = {**os.environ, "OPENAI_BASE_URL": _provider(bench).base_url, "OPENAI_API_KEY": "bench",
           "INSPECT_LOG_DIR": str(bench.folder / "inspect-logs")}
    argv = [str(venv / "bin" / "inspect"), "eval", task.name, "--model", "openai/bench",
            "--max-connections", str(CONNECTIONS), "--display", "none",
            "-M", "responses_api=false"]  # chat completions, as the provider serves
    first, finish = first_call(bench, argv, env, "inspect_ai", cwd=task.parent)
    return {"inspect_first_call_s": first, "inspect_finish_s": finish}


MEASUREMENTS: dict[str, Callable[[Bench], dict[str, float]]] = {
    "python_s": python_s,
    "help_s": help_s,
    "help_imports_s": help_imports_s,
    "runs_list_s": runs_list_s,
    "cold_execute": cold_execute,
    "warm_execute": warm_execute,
    "inspect_execute": inspect_execute,
}
"""Name → measurement (its figures, seconds), in the order of the RESULT line."""

QUICK = ("python_s", "help_s", "help_imports_s", "runs_list_s")
"""What ``--quick`` measures (no pool, no model call)."""


def _arguments(argv: list[str]) -> tuple[bool, Path | None]:
    """``--quick`` and ``--inspect-venv DIR`` of the command line."""
    venv = None
    if "--inspect-venv" in argv:
        venv = Path(argv[argv.index("--inspect-venv") + 1]).resolve()
    return "--quick" in argv, venv


def main() -> None:
    quick, venv = _arguments(sys.argv[1:])
    load = os.getloadavg()[0]
    print(f"load average (1 min) at the start: {load:.2f} on {os.cpu_count()} CPUs", flush=True)
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="medflows-cli-bench-") as tmp:
        bench = Bench(Path(tmp), state_env(Path(tmp)), venv)
        try:
            for name, measure in MEASUREMENTS.items():
                if quick and name not in QUICK:
                    continue
                figures = measure(bench)
                results |= figures
                for key, value in figures.items():
                    print(f"{key}: {value:.3f} s", flush=True)
        finally:
            if bench.provider is not None:
                bench.provider.stop()
    for note in bench.notes:
        print(f"note: {note}")
    print(f"help_s / target 1.0 s: {results['help_s']:.2f}; help_s - python_s: "
          f"{results['help_s'] - results['python_s']:.3f} s")
    if "first_call_s" in results:
        inspect = results.get("inspect_first_call_s")
        print(f"first_call_s / target 3.0 s: {results['first_call_s'] / 3.0:.2f}"
              + (f"; first_call_s - inspect_first_call_s: "
                 f"{results['first_call_s'] - inspect:+.2f} s" if inspect is not None else ""))
    results["load_1m"] = statistics.mean(bench.loads) if bench.loads else load
    print("RESULT " + " ".join(f"{k}={v:.3f}" if k != "load_1m" else f"{k}={v:.2f}"
                               for k, v in results.items()))


if __name__ == "__main__":
    main()
