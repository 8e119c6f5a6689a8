"""The bounded readers of :mod:`tasks_lib.submission_limits` on their own."""

from __future__ import annotations

import gzip
import os

import pytest

from evaluators.core import InvalidSubmissionError
from tasks_lib.submission_limits import (
    SubmissionLimits,
    csv_table,
    display_name,
    gunzip_capped,
    json_depth,
    loads_json,
    utf8_name,
)


def test_gunzip_streams_every_member_and_stops_at_the_cap() -> None:
    data = os.urandom(3_000_000) + bytes(9_000_000)  # output still pending after the input
    packed = gzip.compress(data) + gzip.compress(b"tail")
    assert gunzip_capped(packed, "x.gz", len(data) + 4) == data + b"tail"
    with pytest.raises(InvalidSubmissionError, match=r"x.gz: inflates to more than 1000 bytes "
                                                     r"\(rule: decompressed_size\)"):
        gunzip_capped(packed, "x.gz", 1000)
    with pytest.raises(InvalidSubmissionError, match=r"truncated gzip stream \(rule: gzip_fo"):
        gunzip_capped(packed[:5000], "x.gz", 10 ** 9)
    with pytest.raises(InvalidSubmissionError, match=r"corrupt gzip stream"):
        gunzip_capped(b"\x1f\x8b" + b"\x00" * 40, "x.gz", 10 ** 9)


def test_json_limits() -> None:
    assert loads_json(b'{"a": [1, 2.5, NaN, "[[[["], "b": -12}', "d.json") == {
        "a": [1, 2.5, pytest.approx(float("nan"), nan_ok=True), "[[[["], "b": -12}
    assert json_depth(b'{"s": "[[[[[[[[[[[[[[[[[[[[[["}', 16) == 1
    cases = [(b"[" * 100_000 + b"]" * 100_000, "json_depth"),
             (b"[" + b"1" * 5000 + b"]", "json_number"),
             (b"[" + b"9" * 400 + b"]", "json_number"),
             (b"[" + b"1" * 33 + b"]", "json_number"),
             (b"[" + b",".join([b"0"] * 100_001) + b"]", "json_list_size"),
             (b'{"a": "\xff"}', "utf8"),
             (b"{", "json_format")]
    for data, rule in cases:
        with pytest.raises(InvalidSubmissionError, match=rf"^d.json: .*\(rule: {rule}\)$"):
            loads_json(data, "d.json")
    small = SubmissionLimits(max_json_bytes=10)
    with pytest.raises(InvalidSubmissionError, match="json_size"):
        loads_json(b"[" + b" " * 20 + b"]", "d.json", small)


def test_csv_fields_may_be_as_long_as_the_file() -> None:
    import csv

    limit = csv.field_size_limit()
    big = "x" * (10 * 1024 * 1024)
    rows = csv_table(f"question_id,answer\nq1,{big}\nq2,yes\n".encode(), "answers.csv")
    assert [len(r["answer"]) for r in rows] == [len(big), 3]
    with pytest.raises(InvalidSubmissionError, match=r"answers.csv: .*\(rule: table_size\)"):
        csv_table(b"a,b\n" + b"1,2\n" * 10, "answers.csv", SubmissionLimits(max_table_bytes=20))
    with pytest.raises(InvalidSubmissionError, match=r"\(rule: utf8\)"):
        csv_table(b"a,b\n\xff,1\n", "answers.csv")
    assert csv.field_size_limit() == limit  # restored after reading


def test_file_names_that_are_not_utf8() -> None:
    name = os.fsdecode(b"notes-\xff.txt")
    assert not utf8_name(name) and utf8_name("notes-ü.txt")
    assert display_name(name) == "notes-\\xff.txt"
