"""``medflows medbench download`` / ``upload`` / ``register``: MedBench v4's answer-upload mode
(references never leave the server; every upload is version-locked and append-only)."""

from __future__ import annotations

from pathlib import Path

import typer

from flows.cli.groups import location, medbench_app, user_errors
from flows.cli.output import echo_json
from tasks_lib.errors import InputDataError


def rate_limited() -> tuple[type[Exception], ...]:
    """The refusal of a submitter's rate limit (a user error; its module loads the ledger)."""
    from tasks_lib.medbench.accounts import RateLimited

    return (RateLimited,)


def _default_uploads_per_day() -> int:
    from tasks_lib.medbench.accounts import DEFAULT_UPLOADS_PER_DAY

    return DEFAULT_UPLOADS_PER_DAY


def _default_items_per_minute() -> int:
    from tasks_lib.medbench.accounts import DEFAULT_ITEMS_PER_MINUTE

    return DEFAULT_ITEMS_PER_MINUTE


def split_source(subset: str | None, pool: str | None) -> str:
    """``--subset`` (``active:<id>`` or a subset id) or ``--pool`` (a pool root)."""
    if bool(subset) == bool(pool):
        raise InputDataError("--subset/--pool", "give exactly one: --subset active:<subset_id> "
                                                "or --pool POOL_ROOT")
    if subset:
        from tasks_lib.rotation import subset_pool

        return subset_pool(subset, "--subset")
    assert pool is not None
    return location(pool)


@medbench_app.command("download")
@user_errors(loaded=rate_limited)
def download(
    out: Path = typer.Option(..., help="File to write: one public item per line (JSONL)."),
    subset: str = typer.Option(None, help="Rotation subset: active:<subset_id> (or the id)."),
    pool: str = typer.Option(None, help="A pool version root instead of a subset."),
    submitter: str = typer.Option(None, help="Bind the split to this submitter (only they "
                                             "may upload against it; charged to their "
                                             "items-per-minute limit)."),
    seed: int = typer.Option(None, help="Seed of item order and option permutations "
                                        "(default: random; recorded either way)."),
) -> None:
    """Write a new randomized public split (prompts + answer schema, never a reference; images
    of multimodal items in images/ beside it) and record it server-side; prints the split as
    JSON."""
    from tasks_lib.medbench import accounts
    from tasks_lib.medbench.splits import make_split, split_jsonl, write_images

    source = split_source(subset, pool)
    charge = None
    if submitter:
        who = accounts.ensure_submitter(submitter)
        charge = lambda n: accounts.charge_items(who, n)  # noqa: E731
    split = make_split(source, submitter, seed, charge=charge)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(split_jsonl(split), encoding="utf-8")
    n_images = write_images(split, out.parent)
    echo_json({**split.info.model_dump(mode="json"), "out": str(out.resolve()),
               "n_images": n_images})


@medbench_app.command("upload")
@user_errors(loaded=rate_limited)
def upload(
    file: Path = typer.Argument(..., help="Predictions: one {item_id, answer} per line."),
    submitter: str = typer.Option(..., help="Submitter name (created with the default limits "
                                            "if new)."),
    model_version: str = typer.Option("unversioned", help="Model version string (the lock)."),
    model_name: str = typer.Option(None, help="Model name (default: the submitter name)."),
    as_json: bool = typer.Option(False, "--json", help="Print the submission and score card "
                                                       "summary as JSON."),
) -> None:
    """Validate every line against its split, store the upload as a version-locked run and score
    it server-side through the score flow. A bad file changes nothing (exit 2). The same file
    again for the same lock is the same version: it is scored if it has no score yet (an upload
    killed while scoring resumes), never charged twice."""
    from flows.score import score_run
    from tasks_lib.ledger import store
    from tasks_lib.medbench import accounts
    from tasks_lib.medbench.service import MAX_UPLOAD_BYTES
    from tasks_lib.medbench.submissions import store_upload, view
    from tasks_lib.records import read_card

    if not file.is_file():
        raise InputDataError(str(file), "predictions file not found")
    with file.open("rb") as f:
        data = f.read(MAX_UPLOAD_BYTES + 1)
    if len(data) > MAX_UPLOAD_BYTES:
        raise InputDataError(str(file), f"larger than {MAX_UPLOAD_BYTES} bytes")
    who = accounts.ensure_submitter(submitter)
    row = store_upload(data, str(file), who, model_version, model_name).row
    scores = store.scores_for([row.run_id])
    card = read_card(row.run_id, scores[-1].evaluator_version) if scores else score_run(
        row.run_id)
    sub = view(row)
    if as_json:
        summary = card.summary().model_dump(mode="json", exclude={"per_case"})
        echo_json({"submission": sub, "score_card": summary})
        return
    typer.echo(f"{sub.pool_id} v{sub.pool_version}: {sub.model_name}@{sub.model_version} "
               f"version {sub.version} run {sub.run_id} task_score={card.task_score} "
               f"({card.evaluator_version})")


@medbench_app.command("register")
@user_errors()
def register(
    name: str = typer.Argument(..., help="Submitter name."),
    admin: bool = typer.Option(False, help="May register submitters over HTTP."),
    uploads_per_day: int = typer.Option(default_factory=_default_uploads_per_day,
                                        show_default=False,
                                        help="Uploads per day (default: the service's)."),
    items_per_minute: int = typer.Option(default_factory=_default_items_per_minute,
                                         show_default=False,
                                         help="Items per minute (default: the service's)."),
    new_key: bool = typer.Option(False, help="Issue a new key for an existing submitter (the "
                                             "old one stops working)."),
) -> None:
    """Register a submitter of the HTTP service and print its API key (shown once, stored
    hashed) as JSON."""
    from tasks_lib.ledger import medbench as ledger
    from tasks_lib.medbench import accounts

    if new_key:
        if ledger.get_submitter(accounts.check_name(name)) is None:
            raise InputDataError("submitter", f"{name!r} is not registered")
        echo_json(accounts.issue_key(name))
        return
    echo_json(accounts.register(name, admin, uploads_per_day, items_per_minute))


@medbench_app.command("submissions")
@user_errors(kits=False)
def submissions(
    submitter: str = typer.Option(None, help="Only this submitter's submissions."),
    pool: str = typer.Option(None, help="Only submissions on this pool or subset id."),
) -> None:
    """Version-locked submissions (upload and API mode) with their newest scores, oldest first,
    as JSON."""
    from tasks_lib.ledger import medbench as ledger
    from tasks_lib.medbench.submissions import view

    filters = {k: v for k, v in {"submitter": submitter, "pool_id": pool}.items() if v}
    echo_json([view(r) for r in ledger.submissions(**filters)])
