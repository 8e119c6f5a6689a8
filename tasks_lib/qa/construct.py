"""QA construct's front part (``QAKit.build``): per dataset ingest → de-identify → normalize →
difficulty filter → exemplars, then MELD screen → expert review → write the pool version (vN).
The exploit audit and the ledger row are the shared tail's
(:func:`tasks_lib.pool_publish.publish_version`)."""

from __future__ import annotations

from prefect import get_run_logger, pause_flow_run
from prefect.runtime import flow_run

from evaluators.core import InputDataError
from tasks_lib.caching import as_data
from tasks_lib.domain import SelectionRule
from tasks_lib.qa import steps
from tasks_lib.qa.ingest import default_source, qa_datasets
from tasks_lib.qa.review import ReviewInput, auto_record, to_record
from tasks_lib.qa.types import MeldRecord, PublishedPool, ReviewRecord
from tasks_lib.tracks.base import BuildRequest, OptionValue

REVIEW_POLL_S = 2
DEFAULT_POOL_ID = "medagentsbench-hard"
DEFAULT_MELD_MODELS = ["gpt-4o-mini"]
OPTIONS = ("source", "predictions", "models", "select", "per_dataset", "threshold", "meld",
           "meld_models", "meld_threshold", "auto_approve", "review_timeout_s")
"""The QA kit's build knobs (``BuildRequest.options``), as ``construct-qa`` names them."""


def build_dataset(dataset: str, source: str, predictions: str, predictions_digest: str,
                  models: list[str] | None, select: SelectionRule, per_dataset: int,
                  threshold: float, seed: int) -> steps.DatasetBuild:
    """The per-dataset part of construct, step by step."""
    src = steps.resolve_card(dataset, source)
    ingested = steps.ingest(dataset, src.questions, src.questions_digest)
    scrubbed = steps.deidentify(dataset, as_data(ingested.items))
    normalized = steps.normalize(dataset, as_data(scrubbed.items), src.questions)
    difficulty = steps.difficulty_filter(
        dataset, as_data(normalized.items), predictions, predictions_digest, models, select,
        per_dataset, threshold, seed, src.stratify_field)
    chosen = {d.realidx for d in difficulty if d.selected}
    order = [d.realidx for d in difficulty if d.selected]
    by_id = {it.realidx: it for it in normalized.items if it.realidx in chosen}
    selected = [by_id[r] for r in order]
    exemplars = steps.select_exemplars(dataset, src.train, as_data(ingested.items),
                                       {it.key for it in selected})
    return steps.DatasetBuild(dataset, ingested.n_lines, selected,
                              ingested.rejects + normalized.rejects, difficulty, scrubbed.records,
                              exemplars)


def expert_review(flagged: list[str], auto_approve: bool, timeout_s: int) -> ReviewRecord:
    """Pause for a reviewer (Prefect UI or ``medflows review``) unless auto-approving (inside
    a flow run)."""
    if auto_approve:
        return auto_record(flagged)
    get_run_logger().warning(
        "Pool awaiting expert review (%d flagged items). Resume from the Prefect UI or run: "
        "medflows review %s --reviewer NAME [--reject] [--item KEY=approve|reject]",
        len(flagged), flow_run.get_id())
    form = ReviewInput.with_initial_data(
        description="Flagged (likely memorised) items: " + (", ".join(flagged) or "none"))
    answer = pause_flow_run(wait_for_input=form, timeout=timeout_s, poll_interval=REVIEW_POLL_S)
    return to_record(answer, flagged)


def _str(value: OptionValue, name: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise InputDataError(f"option {name}", f"a string, not {value!r}")


def _strs(value: OptionValue, name: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return [str(v) for v in value]
    raise InputDataError(f"option {name}", f"a list of strings, not {value!r}")


def _num(value: OptionValue, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise InputDataError("option", f"a number, not {value!r}")


def construct(request: BuildRequest) -> PublishedPool:
    """Build and write a hard multiple-choice QA pool from the dataset cards
    ``request.tasks`` (empty: every QA card) with the knobs of :data:`OPTIONS`."""
    o = request.option
    unknown = sorted(set(request.options) - set(OPTIONS))
    if unknown:
        raise InputDataError(", ".join(unknown), f"not a QA build option (it takes "
                                                 f"{', '.join(OPTIONS)})")
    source = _str(o("source"), "source") or default_source()
    predictions = _str(o("predictions"), "predictions") or f"{source}/predictions/full.csv.gz"
    models = _strs(o("models"), "models")
    select = SelectionRule(_str(o("select"), "select") or SelectionRule.FIRST.value)
    per_dataset = int(_num(o("per_dataset"), 100))
    threshold = _num(o("threshold"), 0.5)
    seed = request.seed or 0
    meld = bool(o("meld", True))
    meld_models = _strs(o("meld_models"), "meld_models") or DEFAULT_MELD_MODELS
    meld_threshold = _num(o("meld_threshold"), 0.95)
    digest = steps.file_digest(predictions)
    builds = [build_dataset(ds, source, predictions, digest, models, select, per_dataset,
                            threshold, seed) for ds in request.tasks or qa_datasets()]
    records: list[MeldRecord] = []
    if meld:
        for b in builds:
            records += steps.meld_screen(b.dataset, as_data(b.selected), meld_models,
                                        meld_threshold)
    flagged = sorted({r.key for r in records if r.flagged})
    review = expert_review(flagged, bool(o("auto_approve", False)),
                           int(_num(o("review_timeout_s"), 7 * 24 * 3600)))
    selection: dict[str, str | int | float | list[str] | None] = {
        "tasks": sorted(request.tasks) or None,  # the cards asked for (None: every card)
        "rule": select.value, "per_dataset": per_dataset, "threshold": threshold, "seed": seed,
        "predictions": predictions, "models": models, "meld_models": meld_models if meld else None,
        "meld_threshold": meld_threshold}
    return steps.publish_pool(request.pool_id or DEFAULT_POOL_ID, request.out, as_data(builds),
                              as_data(records), review, selection)
