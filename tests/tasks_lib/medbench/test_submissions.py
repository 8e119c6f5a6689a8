"""Answer-upload mode without the HTTP layer: randomized splits with no private field, per-line
validation that changes nothing, version locking, option letters mapped back, API keys."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from support.medbench_pool import (
    IMAGE_BYTES,
    ITEMS,
    activate_subset_of,
    secret_strings,
    write_pool,
)

from evaluators.core import InputDataError
from tasks_lib.ledger import medbench as ledger
from tasks_lib.ledger import store
from tasks_lib.medbench import accounts
from tasks_lib.medbench.accounts import RateLimited
from tasks_lib.medbench.items import (
    SUBMISSION_FILE,
    PublicItem,
    read_predictions,
    read_public_items,
)
from tasks_lib.medbench.splits import Split, make_split, mapping, split_jsonl, write_images
from tasks_lib.medbench.submissions import (
    UploadRejected,
    original_letter,
    submit_upload,
)
from tasks_lib.records import SUBMISSION, read_run, run_store
from tasks_lib.storage import Storage

PRIVATE_FIELDS = {"letter", "permutation", "text", "labels", "tuples", "boxes", "key_points",
                  "rubric_id", "reference"}


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_pool(Storage(str(tmp_path_factory.mktemp("mbpool") / "v1")))


def _name() -> str:
    return "sub" + uuid.uuid4().hex[:8]


def _answers(split: Split) -> bytes:
    """A perfect-looking upload: the right letter for the MCQ shuffles (in the split's letters)
    and something of the right shape for the rest."""
    refs = {p["item_id"]: r for p, r in ITEMS}
    entries = mapping(ledger.get_split(split.info.split_id)).entries  # type: ignore[arg-type]
    rows = []
    for item in split.items:
        entry = entries[item.item_id]
        ref = refs[entry.item_id]
        if entry.letters:
            shown = next(k for k, v in entry.letters.items() if v == ref["letter"])
            rows.append({"item_id": item.item_id, "answer": shown})
        elif item.answer_type == "region":
            rows.append({"item_id": item.item_id, "answer": [[0, 0, 10, 10]]})
        elif item.answer_type in ("multi_label",):
            rows.append({"item_id": item.item_id, "answer": ["x"]})
        elif item.answer_type == "extraction":
            rows.append({"item_id": item.item_id, "answer": [["a", "b"]]})
        else:
            rows.append({"item_id": item.item_id, "answer": "some text"})
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def test_a_split_holds_public_fields_only_and_fresh_ids(pool: str, tmp_path: Path) -> None:
    a, b = make_split(pool, seed=1), make_split(pool, seed=1)
    out = tmp_path / "split.jsonl"
    out.write_text(split_jsonl(a))
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == len(ITEMS)
    for row in rows:
        assert set(row) == set(PublicItem.model_fields) - {"agent"}  # agent items only
        assert not PRIVATE_FIELDS & set(row)
    text = out.read_text()
    assert [s for s in secret_strings() if s in text] == []
    assert not {i.item_id for i in a.items} & {i.item_id for i in b.items}
    assert all(i.item_id.startswith(a.info.split_id + "-") for i in a.items)
    # the same seed gives the same order and permutations; the ids still differ
    assert [i.prompt for i in a.items] == [i.prompt for i in b.items]
    assert [i.options for i in a.items] == [i.options for i in b.items]


def test_a_split_of_the_active_subset_names_the_subset_version(tmp_path: Path) -> None:
    pool_id = "mbrot" + uuid.uuid4().hex[:6]
    pool_url = write_pool(Storage(str(tmp_path / "pool" / "v1")), pool_id=pool_id)
    subset_url = activate_subset_of(pool_url, pool_id + "-q1", size=5)
    split = make_split(f"active:{pool_id}-q1", seed=1)
    subset_items = read_public_items(subset_url)
    assert (split.info.pool_id, split.info.pool_version) == (pool_id + "-q1", 1)
    assert split.info.n_items == len(subset_items) < len(ITEMS)
    assert sorted(i.prompt for i in split.items) == sorted(i.prompt for i in subset_items)
    with pytest.raises(InputDataError, match="no active version"):
        make_split("active:no-such-subset")


def test_images_are_renamed_per_split_and_copied(tmp_path: Path) -> None:
    pool = write_pool(Storage(str(tmp_path / "pool" / "v1")), image=True)
    split = make_split(pool, seed=1)
    [item] = [i for i in split.items if i.image]
    assert item.image == f"images/{item.item_id}.png" and "nodule-r1" not in split_jsonl(split)
    assert write_images(split, tmp_path / "dl") == 1
    assert (tmp_path / "dl" / item.image).read_bytes() == IMAGE_BYTES


def test_options_are_permuted_and_the_mapping_points_back(pool: str) -> None:
    originals = {p["item_id"]: p for p, _ in ITEMS}
    split = make_split(pool, seed=3)
    entries = mapping(ledger.get_split(split.info.split_id)).entries  # type: ignore[arg-type]
    permuted = 0
    for item in split.items:
        entry = entries[item.item_id]
        if entry.letters is None:
            assert item.options is None
            continue
        original = originals[entry.item_id]["options"]
        for shown, text in (item.options or {}).items():
            assert original[entry.letters[shown]] == text
        permuted += entry.letters != {k: k for k in entry.letters}
    assert permuted >= 1


def test_original_letter_keeps_format_and_leaves_ambiguous_answers() -> None:
    letters = {"A": "C", "B": "A", "C": "D", "D": "B"}
    assert original_letter("A", letters) == "C"
    assert original_letter("B.", letters) == "A."
    assert original_letter("c", letters) == "d"
    assert original_letter("C and D", letters) == "C and D"
    assert original_letter("E", letters) == "E"
    assert original_letter("no idea", letters) == "no idea"


def _ledger_counts() -> tuple[int, int, int]:
    return (len(ledger.submissions()), sum(len(ledger.rate_events(s.submitter))
                                           for s in ledger.submissions()), len(store.runs()))


def test_a_malformed_upload_reports_every_bad_line_and_changes_nothing(pool: str) -> None:
    who = accounts.ensure_submitter(_name())
    split = make_split(pool, who.name, seed=5)
    by_kind = {i.answer_type.value: i.item_id for i in split.items}
    mcq, string_id, box_id = by_kind["single_choice"], by_kind["string"], by_kind["region"]
    lines = [
        json.dumps({"item_id": mcq, "answer": "A"}),
        "{not json",
        json.dumps({"item_id": string_id, "answer": ["a", "list"]}),
        json.dumps({"item_id": mcq, "answer": "B"}),
        json.dumps({"item_id": split.info.split_id + "-0000000000", "answer": "A"}),
        json.dumps({"item_id": box_id, "answer": [[1, 2, 3]]}),
        json.dumps({"item_id": by_kind["multi_label"]}),
    ]
    before = _ledger_counts()
    with pytest.raises(UploadRejected) as caught:
        submit_upload("\n".join(lines).encode(), "preds.jsonl", who, "v1")
    got = {e.line: e.reason for e in caught.value.errors}
    assert sorted(got) == [2, 3, 4, 5, 6, 7]
    assert "malformed JSON" in got[2]
    assert "string" in got[3]
    assert "repeats line 1" in got[4]
    assert "not an item of split" in got[5]
    assert "box" in got[6]
    assert "answer" in got[7]
    assert str(caught.value).startswith("preds.jsonl:2: ")
    assert _ledger_counts() == before
    assert ledger.submissions(submitter=who.name) == []
    assert ledger.rate_events(who.name) == []


def test_foreign_expired_and_unknown_splits_are_refused(pool: str) -> None:
    alice, bob = accounts.ensure_submitter(_name()), accounts.ensure_submitter(_name())
    split = make_split(pool, alice.name, seed=2)
    with pytest.raises(UploadRejected, match="another submitter"):
        submit_upload(_answers(split), "p.jsonl", bob, "v1")
    old = make_split(pool, alice.name, seed=2, now=0.0)
    with pytest.raises(UploadRejected, match="expired"):
        submit_upload(_answers(old), "p.jsonl", alice, "v1")
    with pytest.raises(UploadRejected, match="no downloaded split"):
        submit_upload(b'{"item_id": "spffffffffffff-0123456789", "answer": "A"}\n', "p.jsonl",
                      alice, "v1")
    other = make_split(pool, alice.name, seed=9)
    stray = {"item_id": other.items[0].item_id, "answer": None}
    mixed = _answers(split) + json.dumps(stray).encode() + b"\n"
    with pytest.raises(UploadRejected, match="another split"):
        submit_upload(mixed, "p.jsonl", alice, "v1")
    assert ledger.submissions(submitter=alice.name) == []


def test_uploads_are_version_locked_and_stored_as_runs(pool: str) -> None:
    who = accounts.ensure_submitter(_name(), uploads_per_day=3)
    split = make_split(pool, who.name, seed=4)
    body = _answers(split)
    first = submit_upload(body, "p.jsonl", who, "v1")
    second = submit_upload(body + b"\n", "p.jsonl", who, "v1")  # other bytes: a new version
    other = submit_upload(body, "p.jsonl", who, "v2")
    assert (first.version, second.version, other.version) == (1, 2, 1)
    assert first.run_id != second.run_id
    assert submit_upload(body, "p.jsonl", who, "v1").id == first.id  # same bytes: same version
    rows = ledger.submissions(submitter=who.name)
    assert [(r.model_version, r.version) for r in rows] == [("v1", 1), ("v1", 2), ("v2", 1)]
    assert {(r.pool_id, r.pool_version, r.evaluator_version) for r in rows} == {
        ("mbhand", 1, "medbench/2")}
    with pytest.raises(RateLimited, match="3 uploads per day"):
        submit_upload(body, "p.jsonl", who, "v3")
    run = read_run(first.run_id)
    assert (run.track.value, run.pool_id, run.pool_version, run.n_items) == (
        "medbench", "mbhand", 1, len(ITEMS))
    stored = read_predictions(run_store(first.run_id).child(SUBMISSION))
    assert run_store(first.run_id).child(SUBMISSION).exists(SUBMISSION_FILE)
    refs = {p["item_id"]: r for p, r in ITEMS}
    mcq = [p for p in stored if refs[p.item_id]["answer_type"] == "single_choice"]
    assert len(mcq) == 2 and all(p.answer == refs[p.item_id]["letter"] for p in mcq)
    assert {p.item_id for p in stored} == set(refs)


def test_api_keys_are_stored_hashed_and_checked() -> None:
    name = _name()
    issued = accounts.register(name, uploads_per_day=2)
    row = ledger.get_submitter(name)
    assert row is not None and row.key_hash and row.key_salt and row.key_id
    secret = issued.api_key.split("_", 2)[2]
    assert secret not in json.dumps(row.model_dump(mode="json"))
    who = accounts.authenticate(issued.api_key)
    assert who is not None and who.name == name and who.uploads_per_day == 2
    assert accounts.authenticate(issued.api_key[:-1] + ("x" if issued.api_key[-1] != "x"
                                                        else "y")) is None
    assert accounts.authenticate(None) is None and accounts.authenticate("garbage") is None
    renewed = accounts.issue_key(name)
    assert accounts.authenticate(issued.api_key) is None
    assert accounts.authenticate(renewed.api_key) is not None


def test_register_command_prints_a_working_key_once() -> None:
    from typer.testing import CliRunner

    from flows.cli import medbench_upload_mode  # noqa: F401  (registers the commands)
    from flows.cli.groups import app

    name = _name()
    first = CliRunner().invoke(app, ["medbench", "register", name, "--uploads-per-day", "3"])
    assert first.exit_code == 0, first.output
    key = json.loads(first.stdout)["api_key"]
    who = accounts.authenticate(key)
    assert who is not None and (who.name, who.uploads_per_day, who.admin) == (name, 3, False)
    again = CliRunner().invoke(app, ["medbench", "register", name])
    assert again.exit_code == 2 and "already registered" in again.stderr
    renewed = CliRunner().invoke(app, ["medbench", "register", name, "--new-key"])
    assert renewed.exit_code == 0 and accounts.authenticate(key) is None
    assert accounts.authenticate(json.loads(renewed.stdout)["api_key"]) is not None
    bad = CliRunner().invoke(app, ["medbench", "register", "no/slash"])
    assert bad.exit_code == 2 and bad.stderr.startswith("error: submitter: invalid name")
