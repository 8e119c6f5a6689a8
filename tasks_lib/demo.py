"""What the platform demo (``medflows demo``, :mod:`flows.demo`) shares across its protocols:
the summary row and table, the per-step progress lines, the offline judge, the reuse of pools
an earlier demo built, the leaderboard rows behind a headline, and the MedBench submitter's
scripted answer sheet, its download and upload, and whether a pool can be reused.

Nothing here runs a flow; :mod:`flows.demo` composes the flows each protocol's CLI commands call.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from evaluators.core import Frozen
from tasks_lib.errors import InputDataError
from tasks_lib.settings import get_settings, reset_settings

if TYPE_CHECKING:
    from tasks_lib.report import LeaderboardRow

MEDBENCH_SUBMITTER = "demo"
"""The submitter the MedBench demo downloads and uploads as."""

Echo = Callable[[str], None]
"""Where progress lines and the summary go (``typer.echo`` on the command line)."""


class DemoRow(Frozen):
    """One protocol's line of the demo's summary table."""

    protocol: str = Field(description="qa | imaging | challenge | medbench | rwe.")
    what: str = Field(description="What ran, in a few words.")
    headline: str = Field(description="The headline score(s), or why the protocol was skipped.")
    seconds: float = Field(description="Wall seconds the protocol took.")
    report: str | None = Field(description="URL of its leaderboard.md (None: skipped).")
    pool: str | None = Field(default=None, description="Root URL of the pool version it used.")
    scores: dict[str, float | None] = Field(
        default_factory=dict, description="The headline numbers by name (for --json and tests).")


class Step:
    """What a finished step says after its name (set inside :meth:`Progress.step`)."""

    detail: str = ""


class Progress:
    """One line per finished step: seconds since the demo started, the protocol, the step, what
    it gave and how long it took."""

    def __init__(self, protocol: str, echo: Echo, started: float | None = None) -> None:
        self.protocol = protocol
        self.echo = echo
        self.started = time.monotonic() if started is None else started

    @contextmanager
    def step(self, name: str) -> Iterator[Step]:
        """Time the enclosed block and print its line when it ends (not when it fails: the
        failure says what happened)."""
        begun = time.monotonic()
        note = Step()
        yield note
        now = time.monotonic()
        detail = f": {note.detail}" if note.detail else ""
        self.echo(f"[{now - self.started:6.1f} s] {self.protocol:<9} {name}{detail} "
                  f"({now - begun:.1f} s)")


@contextmanager
def offline_judge() -> Iterator[str]:
    """Run the enclosed block with the judge model the user set, else the offline ``rules``
    judge (a demo makes no provider call; without a key every judged probe would wait out its
    retries). Yields the judge model in use."""
    if os.environ.get("MEDFLOWS_JUDGE_MODEL"):
        yield get_settings().judge_model
        return
    os.environ["MEDFLOWS_JUDGE_MODEL"] = "rules"
    reset_settings()
    try:
        yield "rules"
    finally:
        os.environ.pop("MEDFLOWS_JUDGE_MODEL", None)
        reset_settings()


def demo_folder() -> Path:
    """The demo's own local folder, beside a local storage root (``.medflows/demo`` by
    default; beside the Prefect results folder when storage is remote): the files a user
    would hold — submission folders, a downloaded MedBench split and its answer sheet."""
    settings = get_settings()
    url = settings.storage_url.removeprefix("file://")
    base = settings.results_dir.parent if "://" in url else Path(url).parent
    folder = base / "demo"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def reusable_pool(pool_id: str, fits: Callable[[dict[str, Any]], bool]) -> str | None:
    """Root URL of the newest published version of ``pool_id`` when it is still usable
    (audited, unchanged since it was locked) and its manifest ``fits`` what the demo would
    build; None when it has to be built."""
    from tasks_lib.ledger import store
    from tasks_lib.pool_lock import require_usable
    from tasks_lib.storage import Storage

    rows = store.pools(pool_id=pool_id, kind="pool")
    if not rows:
        return None
    url = max(rows, key=lambda r: r.version).manifest_url.removesuffix("/manifest.json")
    try:
        require_usable(url)
        manifest = Storage(url).read_json("manifest.json")
    except (InputDataError, FileNotFoundError):
        return None
    return url if fits(manifest) else None


def board(pool_url: str) -> list[LeaderboardRow]:
    """The leaderboard rows of a pool version, as ``medflows report --pool`` computes them."""
    from tasks_lib.report import leaderboard, scored_runs
    from tasks_lib.scoring import select_runs

    return leaderboard(scored_runs(select_runs(pool=pool_url)))


LONGEST_OPTION = "scripted-longest-option"
"""Model name of the demo's MedBench submitter's answer sheet."""


def scripted_answers(split_file: Path) -> str:
    """The answer sheet a scripted submitter writes from a downloaded split alone (no model):
    the longest option of each single-choice item (first in letter order on a tie), an empty
    list or string elsewhere, and an honest "I do not know." to open questions — a floor any
    model should beat. One ``{"item_id", "answer"}`` line per item."""
    rows = []
    for line in split_file.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        kind = item["answer_type"]
        if kind == "single_choice" and item.get("options"):
            options: dict[str, str] = item["options"]
            answer: Any = max(sorted(options), key=lambda letter: len(options[letter]))
        elif kind in ("multi_label", "extraction", "region"):
            answer = []
        elif kind == "open_ended":
            answer = "I do not know."
        else:
            answer = ""
        rows.append(json.dumps({"item_id": item["item_id"], "answer": answer}))
    return "".join(f"{r}\n" for r in rows)


def summary_table(rows: list[DemoRow], total_s: float) -> str:
    """The demo's closing table (protocol, what ran, headline, seconds), the demo's wall time
    ``total_s`` (from its first step; the command's own start-up before it is not counted),
    then each report's path."""
    head = ("protocol", "what ran", "headline", "seconds")
    cells = [(r.protocol, r.what, r.headline, f"{r.seconds:.1f}") for r in rows]
    widths = [max(len(c[i]) for c in [head, *cells]) for i in range(len(head))]

    def line(values: tuple[str, ...]) -> str:
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " |"

    out = [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(c) for c in cells]
    out += ["", f"total {total_s:.1f} s since the demo started", "", "reports:"]
    out += [f"  {r.protocol:<9} {r.report or '(none: ' + r.headline + ')'}" for r in rows]
    return "\n".join(out)


def n_items(pool_url: str) -> int:
    """Questions of a QA pool version (its public item lines)."""
    from tasks_lib.storage import Storage

    return len(Storage(pool_url).read_text("public/items.jsonl").splitlines())


def upload_again(folder: Path, pool_hash: str) -> Any:
    """The submission row of the answer sheet an earlier demo wrote for this pool version
    (uploaded again: the same bytes are the same version); None when there is none or its
    split can no longer take it (expired, or not in this ledger)."""
    from tasks_lib.medbench import accounts
    from tasks_lib.medbench.submissions import store_upload

    sheet, split = folder / "answers.jsonl", folder / "split.json"
    if not (sheet.is_file() and split.is_file()):
        return None
    if json.loads(split.read_text(encoding="utf-8")).get("pool_hash") != pool_hash:
        return None
    who = accounts.ensure_submitter(MEDBENCH_SUBMITTER)
    try:
        return store_upload(sheet.read_bytes(), str(sheet), who, "1", LONGEST_OPTION).row
    except InputDataError:  # the split expired or this ledger never issued it
        return None


def download_and_upload(url: str, folder: Path) -> tuple[Any, str]:
    """``medflows medbench download`` then ``upload`` of a scripted answer sheet; the
    submission row and what was done."""
    from tasks_lib.medbench import accounts
    from tasks_lib.medbench.splits import make_split, split_jsonl, write_images
    from tasks_lib.medbench.submissions import store_upload

    who = accounts.ensure_submitter(MEDBENCH_SUBMITTER)
    folder.mkdir(parents=True, exist_ok=True)
    split = make_split(url, MEDBENCH_SUBMITTER, seed=0,
                       charge=lambda n: accounts.charge_items(who, n))
    split_file, sheet = folder / "split.jsonl", folder / "answers.jsonl"
    split_file.write_text(split_jsonl(split), encoding="utf-8")
    write_images(split, folder)
    (folder / "split.json").write_text(split.info.model_dump_json(indent=2), encoding="utf-8")
    sheet.write_text(scripted_answers(split_file), encoding="utf-8")
    row = store_upload(sheet.read_bytes(), str(sheet), who, "1", LONGEST_OPTION).row
    return row, (f"split {split.info.split_id} ({split.info.n_items} items) → {split_file}, "
                 f"answers → {sheet}")


def database_ready(manifest: dict[str, Any]) -> bool:
    """The pool's study database is on the study server and holds the pool's EHR."""
    from tasks_lib.rwe.cluster import check_study_database, study_server

    server = study_server().model_copy(update={"database": manifest.get("database")})
    try:
        check_study_database(server, list(manifest.get("schemas", {}).values()),
                             manifest.get("ehr_hash", ""))
    except InputDataError:
        return False
    return True
