"""MedBench v4 items: the public item, the private reference, the prediction row, the pool layout.

Pool layout (one pool version, under ``pools/<pool_id>/v<N>/`` of the storage root)::

    manifest.json                 MedBenchManifest (tasks with dimension/specialty/answer type)
    public/items.jsonl            PublicItem per line: what a model or a downloader may see
    public/images/<name>.png      images of multimodal / region items (named by PublicItem.image)
    private/references.jsonl      Reference per line: never leaves the server
    audit/                        provenance (audit.json of the exploit audit, build notes)

Option shuffles are separate evaluation items (spec §4.1): a single-choice question ``<base>``
appears as ``<base>#s0``, ``<base>#s1``, … with its own seeded permutation of the options; the
public item holds the options already shuffled (letter → text) and the reference holds the letter
the correct option sits at *in that shuffle*.

A prediction row (API mode writes them; answer-upload mode receives them) is ``{"item_id",
"answer"}`` per line of ``runs/<run_id>/submission/predictions.jsonl``. Departure from spec §3
(which names the field ``prediction``): the field is ``answer``, as in the QA track's answer
lines; the split token of the upload mode lives in the upload service, not in this row.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

from pydantic import Field, SerializerFunctionWrapHandler, ValidationError, model_serializer

from evaluators.core import Frozen, InputDataError
from tasks_lib import pool_format, strict_json
from tasks_lib.medbench.agent_types import MAX_TOOL_CALLS, AgentKey, AgentView, ToolCall
from tasks_lib.pool_format import PoolHeader
from tasks_lib.storage import Storage

PUBLIC_ITEMS = "public/items.jsonl"
REFERENCES = "private/references.jsonl"
MANIFEST = pool_format.MANIFEST
IMAGES = "public/images"
AUDIT = "audit"
SUBMISSION_FILE = "predictions.jsonl"
"""The file a MedBench submission folder holds (``runs/<run_id>/submission/predictions.jsonl``)."""

SHUFFLE_SEP = "#s"
"""Separator of a base item id and its shuffle index (``<base>#s<k>``)."""

MAX_LINE_BYTES = 1 << 20
"""Longest prediction line accepted (bytes)."""


class Dimension(StrEnum):
    """Capability dimension of a task (spec §2.1; ``MM_*`` = the multimodal track's axes §2.2;
    ``AG_*`` = the agent track's dimensions §2.3)."""

    MLU = "MLU"
    MLG = "MLG"
    MKQA = "MKQA"
    CMR = "CMR"
    HSE = "HSE"
    MM_PERCEPTION = "MM-A1"
    MM_UNDERSTANDING = "MM-A2"
    MM_DECISION = "MM-A3"
    AG_PLANNING = "AG-G1"
    """Goal decomposition & path planning."""
    AG_TOOLS = "AG-G2"
    """Tool & API operations."""
    AG_INTENT = "AG-G3"
    """Intent recognition & role adaptation."""
    AG_LONG_CONTEXT = "AG-G4"
    """Long-context processing."""
    AG_COLLABORATION = "AG-G5"
    """Multi-agent collaboration."""
    AG_SAFETY = "AG-G6"
    """Safety & adversarial robustness."""


class AnswerType(StrEnum):
    """What shape an answer has; the metric is chosen by it (spec §2.5, §3)."""

    SINGLE_CHOICE = "single_choice"
    MULTI_LABEL = "multi_label"
    EXTRACTION = "extraction"
    OPEN_ENDED = "open_ended"
    REGION = "region"
    STRING = "string"


Answer = str | list[str] | list[list[str]] | list[list[float]] | None
"""A prediction's answer: a letter or string; labels; ``[type, value]`` tuples; boxes
``[x1, y1, x2, y2]``; None = no answer."""


def base_id(item_id: str) -> str:
    """``<base>#s<k>`` → ``<base>`` (ids without a shuffle suffix unchanged)."""
    return item_id.split(SHUFFLE_SEP, 1)[0]


class _AgentOptional(Frozen):
    """A row whose agent-track field is left out of its JSON when unset, so the files of pools
    without agent items are byte-identical to those written before the field existed."""

    _optional: tuple[str, ...] = ("agent",)

    @model_serializer(mode="wrap")
    def _drop_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in self._optional:
            if data.get(key, 0) is None:
                del data[key]
        return data


class PublicItem(_AgentOptional):
    """What a model (API mode) or a downloader (answer-upload mode) sees of one evaluation item."""

    item_id: str = Field(description="Evaluation item id; single-choice shuffles are "
                                     "``<base>#s<k>``.")
    task_id: str = Field(description="Task (card) the item belongs to.")
    dimension: Dimension = Field(description="Capability dimension of the task.")
    specialty: str = Field(description="Clinical specialty (stratum of the rotation).")
    answer_type: AnswerType = Field(description="Shape of the expected answer.")
    prompt: str = Field(description="The question or instruction (no answer in it).")
    options: dict[str, str] | None = Field(
        default=None, description="Single choice: letter → option text, already shuffled for "
                                  "this evaluation item; None for other answer types.")
    answer_schema: str = Field(description="Prose (or JSON schema) of what the answer must be.")
    image: str | None = Field(default=None, description="Multimodal/region items: image path "
                                                        "relative to the pool root.")
    agent: AgentView | None = Field(default=None, description="Agent-track items: the tools "
                                    "and public parameters (None: not an agent item).")


class Reference(_AgentOptional):
    """The private reference of one evaluation item (fields used depend on the answer type)."""

    item_id: str = Field(description="Evaluation item id (same as the public item's).")
    task_id: str = Field(description="Task the item belongs to.")
    answer_type: AnswerType = Field(description="Shape of the expected answer.")
    letter: str | None = Field(default=None, description="Single choice: the letter the correct "
                                                         "option sits at in this shuffle.")
    permutation: list[str] | None = Field(
        default=None, description="Single choice: original option letters in shown order.")
    text: str | None = Field(default=None, description="Gold text: correct option (single "
                                                       "choice), reference answer (open-ended), "
                                                       "the string (string).")
    labels: list[str] = Field(default_factory=list, description="Multi-label: gold labels.")
    tuples: list[list[str]] = Field(default_factory=list,
                                    description="Extraction: gold ``[type, value]`` tuples.")
    boxes: list[list[float]] = Field(default_factory=list,
                                     description="Region: gold boxes ``[x1, y1, x2, y2]`` (px).")
    key_points: list[str] = Field(default_factory=list,
                                  description="Open-ended: key points the answer must cover.")
    rubric_id: str | None = Field(default=None, description="Open-ended: judge rubric "
                                                            "(``evaluators/judges/rubrics/"
                                                            "medbench/<id>.yaml``).")
    agent: AgentKey | None = Field(default=None, description="Agent-track items: the tools' "
                                   "world, the reference plan, the injection marks.")


class Prediction(_AgentOptional):
    """One answer line of a submission (``predictions.jsonl``)."""

    _optional = ("tool_calls",)

    item_id: str = Field(min_length=1, max_length=200, description="Evaluation item id.")
    answer: Answer = Field(description="The answer (shape per the item's answer type).")
    error: str | None = Field(default=None, description="API mode: why the model call failed "
                                                        "(the item then counts as unanswered).")
    tool_calls: list[ToolCall] | None = Field(
        default=None, max_length=MAX_TOOL_CALLS, description="Agent-track items: the tool "
        "calls the agent made, in order (None: not recorded).")


class TaskEntry(Frozen):
    """One task of a pool as its manifest lists it."""

    dimension: Dimension = Field(description="Capability dimension.")
    specialty: str = Field(description="Specialty of most items (items may differ).")
    answer_type: AnswerType = Field(description="Answer type.")
    metrics: list[str] = Field(description="Registered metrics computed for the task "
                                           "(first = task score).")
    n_items: int = Field(ge=0, description="Evaluation items (shuffles counted).")
    source: str = Field(description="Where the items come from (prose).")
    judge_weights: dict[str, float] | None = Field(
        default=None, description="Open-ended: judge dimension weights over the rubric's.")
    dataset: str | None = Field(
        default=None, description="MedBench v4 dataset the task stands in for (e.g. MedOCR); "
                                  "None where the paper names none.")


class MedBenchManifest(PoolHeader):
    """``manifest.json`` of a MedBench pool version (or rotation subset): the shared header
    (``cards`` are its task ids) and the MedBench body."""

    pool_kind = "a MedBench pool"

    track: str = Field(default="medbench", description="Always ``medbench``.")
    seed: int = Field(description="Seed of every random draw of the build (or the rotation).")
    tasks: dict[str, TaskEntry] = Field(description="task_id → task entry.")
    n_items: int = Field(ge=0, description="Evaluation items.")
    notes: list[str] = Field(default_factory=list, description="Build notes and departures.")


def _read_lines(root: Storage, key: str) -> list[tuple[int, dict[str, Any]]]:
    if not root.exists(key):
        raise InputDataError(root.url(key), "missing (not a MedBench pool?)")
    out = []
    for n, line in enumerate(root.read_text(key).splitlines(), 1):
        if line.strip():
            try:
                out.append((n, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise InputDataError(root.url(key), f"not JSON: {exc.msg}", n) from None
    return out


def _reason(exc: ValidationError) -> str:
    first = exc.errors()[0]
    if first["loc"] and first["loc"][0] == "answer":
        return ("answer: must be a string, a list of strings, a list of [type, value] string "
                "pairs, a list of [x1, y1, x2, y2] number boxes, or null")
    where = ".".join(str(p) for p in first["loc"]) or "line"
    return f"{where}: {first['msg']}"[:300]


def read_public_items(pool_url: str) -> list[PublicItem]:
    """The public items of a pool (or subset) version, in file order."""
    root = Storage(pool_url)
    out = []
    for n, row in _read_lines(root, PUBLIC_ITEMS):
        try:
            out.append(PublicItem.model_validate(row))
        except ValidationError as exc:
            raise InputDataError(root.url(PUBLIC_ITEMS), _reason(exc), n) from None
    return out


def read_references(pool_url: str) -> dict[str, Reference]:
    """item_id → private reference of a pool (or subset) version (server side only)."""
    root = Storage(pool_url)
    out: dict[str, Reference] = {}
    for n, row in _read_lines(root, REFERENCES):
        try:
            ref = Reference.model_validate(row)
        except ValidationError as exc:
            raise InputDataError(root.url(REFERENCES), _reason(exc), n) from None
        out[ref.item_id] = ref
    return out


def read_manifest(pool_url: str) -> MedBenchManifest:
    """The manifest of a MedBench pool (or subset) version
    (:func:`tasks_lib.pool_format.read_manifest`)."""
    return pool_format.read_manifest(pool_url, MedBenchManifest)


def parse_prediction(line: str | bytes, source: str, n: int) -> Prediction:
    """One prediction line; a bad line raises ``InputDataError(source, reason, n)``."""
    if len(line) > MAX_LINE_BYTES:
        raise InputDataError(source, f"line longer than {MAX_LINE_BYTES} bytes", n)
    try:
        data = strict_json.loads(line)
    except strict_json.StrictJSONError as exc:
        raise InputDataError(source, f"{exc} (rule: {exc.rule})", n) from None
    if not isinstance(data, dict):
        raise InputDataError(source, "not a JSON object with item_id and answer", n)
    if "answer" not in data:
        raise InputDataError(source, "answer: field required (null for no answer)", n)
    try:
        return Prediction.model_validate(data, strict=True)
    except ValidationError as exc:
        raise InputDataError(source, _reason(exc), n) from None


def parse_predictions(text: str | bytes, source: str) -> list[Prediction]:
    """Every line of a predictions file; the first bad line or a duplicate id raises
    ``InputDataError`` naming the file and line (nothing is half-read)."""
    raw = text.decode("utf-8", "strict") if isinstance(text, bytes) else text
    out: list[Prediction] = []
    seen: dict[str, int] = {}
    for n, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        pred = parse_prediction(line, source, n)
        if pred.item_id in seen:
            raise InputDataError(source, f"item_id {pred.item_id!r} repeats line "
                                         f"{seen[pred.item_id]}", n)
        seen[pred.item_id] = n
        out.append(pred)
    return out


def read_predictions(folder: Storage | str) -> list[Prediction]:
    """The predictions of a submission folder (``predictions.jsonl``; missing = none)."""
    root = Storage(folder) if isinstance(folder, str) else folder
    if not root.exists(SUBMISSION_FILE):
        return []
    try:
        text = root.read_bytes(SUBMISSION_FILE).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputDataError(root.url(SUBMISSION_FILE), f"not UTF-8 ({exc.reason})") from None
    return parse_predictions(text, root.url(SUBMISSION_FILE))
