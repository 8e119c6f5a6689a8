"""A corpus of malformed QA inputs (question JSONL lines and files, recorded-prediction CSVs).

Each :class:`QACase` is one hostile or faulty input with the outcome the readers promise for it
(see :mod:`tasks_lib.qa.ingest`): the whole file **refused** with an ``error:`` naming the file,
the line and the rule; or the bad line **skipped** and reported (a reject with line and reason)
while the good lines are still ingested; or **accepted** (harmless variations: BOM, CRLF, blank
lines, ids written ``1.0``). ``python -m support.malformed_qa_inputs DIR`` writes every case's
file under ``DIR`` for manual runs of the CLI.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

QUESTION_FILE = "questions/{dataset}.test.jsonl"
HEADER = ("dataset,split,model,method,realidx,predicted_answer,prompt_tokens,completion_tokens,"
          "time_s,cost_usd")
GOOD_IDS = ("0", "1", "2")
Outcome = Literal["refused", "skipped", "accepted"]


def question(realidx: object = 0, **fields: object) -> dict[str, object]:
    """A valid question line (fields override or, given as None, are dropped). The answer is
    the option "right", at A, C or D by the id's last digit (0, 1, 2 mod 3; never B, the
    recorded predictions' answer, so every item stays in the hard subset), so a pool of them
    passes the audit's position check; with ``options`` given it is A."""
    last = str(realidx)[-1:]
    gold = "ACD"[int(last) % 3] if last.isdigit() and "options" not in fields else "A"
    others = iter(("wrong", "other", "spare"))
    options = {k: "right" if k == gold else next(others) for k in "ABCD"}
    if "options" in fields:
        options = {"A": "right", "B": "wrong"}
    row: dict[str, object] = {"realidx": realidx,
                              "question": f"Question number {realidx}: pick one.",
                              "options": options, "answer_idx": gold, "answer": "right",
                              "meta_info": "step1"}
    row.update(fields)
    return {k: v for k, v in row.items() if v is not None}


def line(row: dict[str, object]) -> bytes:
    """One JSONL line (no newline)."""
    return json.dumps(row).encode()


GOOD_LINES = tuple(line(question(int(i))) for i in GOOD_IDS)


def questions_with(bad: list[bytes], at: int = 1) -> bytes:
    """The good lines with ``bad`` inserted after the first ``at`` of them (bad lines start at
    line ``at + 1``)."""
    lines = [*GOOD_LINES[:at], *bad, *GOOD_LINES[at:]]
    return b"\n".join(lines) + b"\n"


def prediction_row(realidx: str = "0", answer: str = "B", prompt: str = "10",
                   completion: str = "5", time_s: str = "1.5", cost: str = "") -> str:
    """One predictions CSV row for dataset medqa, model m, method zero_shot."""
    return f"medqa,full,m,zero_shot,{realidx},{answer},{prompt},{completion},{time_s},{cost}"


def predictions_with(bad: list[str], header: str = HEADER) -> bytes:
    """Header, one good row, the ``bad`` rows (from line 3), two more good rows."""
    rows = [header, prediction_row("0"), *bad, prediction_row("1"), prediction_row("2")]
    return ("\n".join(rows) + "\n").encode()


def gz(data: bytes) -> bytes:
    """gzip of ``data``."""
    return gzip.compress(data, compresslevel=6)


def gzip_bomb(unit: bytes, decompressed: int, member: int = 32 << 20) -> bytes:
    """A small gzip file that inflates to about ``decompressed`` bytes of repeated ``unit``:
    one compressed member of ``member`` bytes, repeated (gzip allows concatenated members)."""
    block = unit * max(1, member // len(unit))
    one = gz(block)
    return one * max(1, decompressed // len(block))


def truncated(data: bytes) -> bytes:
    """The first two thirds of ``data``."""
    return data[: len(data) * 2 // 3]


def corrupted(gz_data: bytes) -> bytes:
    """A gzip file whose CRC-32 trailer does not match its content."""
    crc = bytes(b ^ 0xFF for b in gz_data[-8:-4])
    return gz_data[:-8] + crc + gz_data[-4:]


@dataclass(frozen=True)
class QACase:
    """One malformed input and the promised outcome."""

    name: str
    target: Literal["questions", "predictions"]
    content: Callable[[], bytes]
    outcome: Outcome
    rule: str = ""
    """Text the error or the reject reason contains (empty for accepted cases)."""
    line: int | None = None
    """Line the error or the reject names (None: a file-level refusal without a line)."""
    filename: str = "p.csv"
    """Predictions file name (questions always use the card's file)."""
    step: str = "ingest"
    """Step that rejects a skipped question line (ingest or normalize)."""
    good: tuple[str, ...] = GOOD_IDS
    """Ids still ingested (questions)."""
    bomb: bool = False
    """Decompresses to far more than the limit: peak memory is measured."""
    extra: dict[str, object] = field(default_factory=dict)
    """Case-specific expectations (e.g. replay counts)."""


def _q(name: str, bad: list[bytes] | bytes, rule: str, line_no: int = 2, *, at: int = 1,
       step: str = "ingest", good: tuple[str, ...] = GOOD_IDS) -> QACase:
    lines = bad if isinstance(bad, list) else [bad]
    data = questions_with(lines, at)
    return QACase(name, "questions", lambda: data, "skipped", rule, line_no, step=step, good=good)


def _qfile(name: str, content: Callable[[], bytes], rule: str, line_no: int | None = None
           ) -> QACase:
    return QACase(name, "questions", content, "refused", rule, line_no)


def _p(name: str, content: Callable[[], bytes], rule: str, line_no: int | None = 3,
       filename: str = "p.csv", bomb: bool = False) -> QACase:
    return QACase(name, "predictions", content, "refused", rule, line_no, filename=filename,
                  bomb=bomb)


DEEP = 100_000
BIG = "1" * 5000


def question_line_cases() -> list[QACase]:
    """Bad question lines: each is skipped with a reason, the good lines are kept."""
    return [
        _q("realidx-5000-digits", f'{{"realidx": {BIG}, "question": "q", "options": '
           f'{{"A": "a", "B": "b"}}, "answer_idx": "A"}}'.encode(), "max_number_digits"),
        _q("nested-100000-deep", b"[" * DEEP + b"]" * DEEP, "max_depth"),
        _q("nested-field-deep", b'{"realidx": 9, "question": ' + b"[" * DEEP + b"]" * DEEP
           + b"}", "max_depth"),
        _q("escaped-quotes-after-brackets", b"[" * 20 + b'"' + b'\\"' * 500_000,
           "malformed JSON: Unterminated string"),  # quadratic for a regex string scanner
        _q("non-utf8-byte", line(question(9)).replace(b"number 9:", b"number \xff 9:"),
           "not UTF-8 text: byte 0xff"),
        _q("realidx-1.0-beside-1", line(question(1.0)), "duplicate realidx: '1'", 4, at=3),
        _q("realidx-string-beside-int", line(question("2")), "duplicate realidx: '2'", 4, at=3),
        _q("realidx-boolean", line(question(True)), "got a boolean"),
        _q("realidx-fraction", line(question(1.5)), "realidx 1.5 is not an integer"),
        _q("realidx-1e400", b'{"realidx": 1e400, "question": "q", "options": {"A": "a", "B": '
           b'"b"}, "answer_idx": "A"}', "magnitude is over 1e+15"),
        _q("realidx-list", line(question([9])), "got a list"),
        _q("realidx-too-long", line(question("x" * 500)), "max_id_chars"),
        _q("malformed-json", b'{"realidx": 9, "question": ', "malformed JSON"),
        _q("not-an-object", b"[1, 2]", "not a JSON object (got a list)"),
        _q("json-string-line", b'"just text"', "not a JSON object (got a string)"),
        _q("nan-constant", b'{"realidx": NaN, "question": "q"}', "NaN is not a JSON number"),
        _q("lone-surrogate", line(question(9)).replace(b"number 9:", b"number \\ud800 9:"),
           "lone surrogate"),
        _q("surrogate-key", b'{"realidx": 9, "\\udc00": 1}', "lone surrogate"),
        _q("realidx-1e16", b'{"realidx": 10000000000000000, "question": "q"}',
           "magnitude is over 1e+15"),
        _q("missing-question", line(question(9, question=None)), "missing field(s): question"),
        _q("missing-options", line(question(9, options=None)), "missing field(s): options"),
        _q("unknown-field", line(question(9, answer_key="A")), "unknown field(s): answer_key"),
        _q("question-is-number", line(question(9, question=42)),
           "question must be a string, got a number"),
        _q("question-is-boolean", line(question(9, question=True)),
           "question must be a string, got a boolean"),
        _q("options-as-list", line(question(9, options=["a", "b"])),
           "options must be an object mapping letters to text, got a list"),
        _q("option-keys-not-letters", line(question(9, options={"1": "a", "2": "b"})),
           "is not a single letter A-Z"),
        _q("option-value-number", line(question(9, options={"A": 1, "B": 2})),
           "option A must be text, got a number"),
        _q("option-letter-twice", line(question(9, options={"A": "a", " A": "b"})),
           "option A appears twice"),
        _q("answer-idx-number", line(question(9, answer_idx=0)),
           "answer_idx must be a string, got a number"),
        _q("meta-info-object", line(question(9, meta_info={"step": 1})),
           "meta_info must be a string, got an object"),
        _q("key-twice", b'{"realidx": 9, "realidx": 10, "question": "q"}', "appears twice"),
        _q("line-over-1MiB", line(question(9, question="x" * (2 << 20))), "max_line_bytes"),
        _q("field-over-64k", line(question(9, question="x" * 100_000)), "max_field_chars"),
        _q("answer-not-among-options", line(question(9, answer_idx="E")),
           "answer_idx 'E' is not one of the options", step="normalize"),
        _q("single-option", line(question(9, options={"A": "right"})),
           "needs at least two options", step="normalize"),
        _q("empty-option-text", line(question(9, options={"A": "right", "B": "  "})),
           "an option text is empty", step="normalize"),
    ]


def accepted_question_cases() -> list[QACase]:
    """Harmless variations: everything is ingested, nothing rejected."""
    crlf = b"\xef\xbb\xbf" + b"\r\n".join(GOOD_LINES) + b"\r\n"
    blanks = b"\n\n" + b"\n   \n".join(GOOD_LINES) + b"\n\n"
    return [
        QACase("bom-and-crlf", "questions", lambda: crlf, "accepted"),
        QACase("blank-lines", "questions", lambda: blanks, "accepted"),
    ]


def question_file_cases() -> list[QACase]:
    """Unusable question files: refused whole."""
    return [
        _qfile("empty-question-file", lambda: b"", "question file is empty"),
        _qfile("blank-question-file", lambda: b"\n  \n\r\n", "no lines"),
        _qfile("utf16-question-file", lambda: "\n".join(
            json.dumps(question(i)) for i in range(3)).encode("utf-16"), "UTF-16", 1),
        _qfile("gzip-under-jsonl-name", lambda: gz(b"\n".join(GOOD_LINES)),
               "gzip-compressed data in a file whose name does not end in .gz"),
        _qfile("question-file-over-64MiB", lambda: b" " * (65 << 20), "max_file_bytes"),
    ]


def prediction_cases() -> list[QACase]:
    """Bad recorded predictions: refused whole, naming the line and the rule."""
    good = predictions_with([])
    return [
        _p("plain-file-named-gz", lambda: good, "not gzip data", None, "p.csv.gz"),
        _p("truncated-csv-gz", lambda: truncated(gz(good * 200)), "truncated gzip data", None,
           "p.csv.gz"),
        _p("corrupt-csv-gz", lambda: corrupted(gz(good * 200)), "corrupt gzip data", None,
           "p.csv.gz"),
        _p("gzip-bomb-rows", lambda: gz(HEADER.encode() + b"\n")
           + gzip_bomb((prediction_row("0") + "\n").encode(), 2 << 30),
           "max_decompressed_bytes", None, "p.csv.gz", bomb=True),
        _p("gzip-bomb-nul", lambda: gzip_bomb(b"\0", 2 << 30), "max_decompressed_bytes", None,
           "p.csv.gz", bomb=True),
        _p("gzip-under-csv-name", lambda: gz(good), "does not end in .gz", None),
        _p("csv-non-utf8-byte", lambda: predictions_with(["medqa,full,m,zero_shot,5,\xff,1,1,1,"])
           .replace("\xff".encode(), b"\xff"), "not UTF-8 text: byte 0xff"),
        _p("tokens-not-numeric", lambda: predictions_with([prediction_row("5", prompt="many")]),
           "prompt_tokens 'many' is not a number"),
        _p("tokens-boolean", lambda: predictions_with([prediction_row("5", completion="True")]),
           "completion_tokens 'True' is not a number"),
        _p("tokens-fraction", lambda: predictions_with([prediction_row("5", prompt="12.5")]),
           "not a whole number"),
        _p("tokens-5000-digits", lambda: predictions_with([prediction_row("5", prompt=BIG)]),
           "max_number_digits"),
        _p("negative-cost", lambda: predictions_with([prediction_row("5", cost="-0.5")]),
           "cost_usd '-0.5' is negative"),
        _p("cost-1e999", lambda: predictions_with([prediction_row("5", cost="1e999")]),
           "not a finite number"),
        _p("time-nan", lambda: predictions_with([prediction_row("5", time_s="nan")]),
           "time_s 'nan' is not a number"),
        _p("time-infinity", lambda: predictions_with([prediction_row("5", time_s="inf")]),
           "time_s 'inf' is not a number"),
        _p("tokens-1e30", lambda: predictions_with([prediction_row("5", prompt="1e30")]),
           "prompt_tokens '1e30' is over the limit of 1e+12"),
        _p("tokens-31-digit-integer", lambda: predictions_with(
            [prediction_row("5", completion="1" + "0" * 30)]),
           "completion_tokens '1000000000000000000000000000000' is over the limit"),
        _p("time-1e300", lambda: predictions_with([prediction_row("5", time_s="1e300")]),
           "time_s '1e300' is over the limit of 1e+07"),
        _p("cost-1e20", lambda: predictions_with([prediction_row("5", cost="1e20")]),
           "cost_usd '1e20' is over the limit of 1e+06"),
        _p("empty-realidx", lambda: predictions_with([prediction_row("")]), "realidx is empty"),
        _p("csv-realidx-too-long", lambda: predictions_with([prediction_row("x" * 500)]),
           "max_id_chars"),
        _p("ragged-row", lambda: predictions_with([prediction_row("5") + ",extra,more"]),
           "row has 12 fields, the header has 10"),
        _p("short-row", lambda: predictions_with(["medqa,full,m,zero_shot,5,A"]),
           "row has 6 fields, the header has 10"),
        _p("csv-field-over-64k", lambda: predictions_with([prediction_row("5", "x" * 100_000)]),
           "max_field_chars"),
        _p("field-over-csv-limit", lambda: predictions_with([prediction_row("5", "x" * 300_000)]),
           "max_field_chars"),
        _p("empty-predictions", lambda: b"", "predictions file is empty", None),
        _p("header-only", lambda: (HEADER + "\n").encode(), "has a header but no rows", None),
        _p("missing-columns", lambda: b"dataset,model\nmedqa,m\n", "missing column(s): split", 1),
        _p("repeated-column", lambda: predictions_with([], HEADER + ",model"),
           "repeated column(s): model", 1),
        _p("utf16-predictions", lambda: predictions_with([]).decode().encode("utf-16"),
           "UTF-16", 1),
    ]


def accepted_prediction_cases() -> list[QACase]:
    """Harmless variations: read; ``extra['n']`` predictions of medqa ids 0-2 are scored."""
    crlf = b"\xef\xbb\xbf" + predictions_with([]).replace(b"\n", b"\r\n")
    dup = predictions_with([prediction_row("1.0", answer="A")])  # 1.0 = 1: the first row wins
    return [
        QACase("predictions-bom-and-crlf", "predictions", lambda: crlf, "accepted",
               extra={"n": 3, "correct": 0}),
        QACase("predictions-realidx-1.0-beside-1", "predictions", lambda: dup, "accepted",
               extra={"n": 3, "correct": 1}),
        QACase("predictions-gzip", "predictions", lambda: gz(predictions_with([])), "accepted",
               filename="p.csv.gz", extra={"n": 3, "correct": 0}),
    ]


def all_cases() -> list[QACase]:
    """Every case of the corpus."""
    return [*question_line_cases(), *accepted_question_cases(), *question_file_cases(),
            *prediction_cases(), *accepted_prediction_cases()]


def write(case: QACase, folder: Path) -> Path:
    """Write a case's file under ``folder`` (questions as the medqa card's file)."""
    rel = QUESTION_FILE.format(dataset="medqa") if case.target == "questions" else case.filename
    path = folder / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(case.content())
    return path


if __name__ == "__main__":  # pragma: no cover - manual use
    out = Path(sys.argv[1])
    for c in all_cases():
        print(write(c, out / c.name))
