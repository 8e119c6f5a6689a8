"""Papercut (issue #26): an upload whose first item id is unknown is refused with every bad line
(as docs/medbench.md says), not with one file-level error; an upload whose ids name no
downloaded split lists every line too, bounded by ``MAX_REPORTED`` and counted in full."""

from __future__ import annotations

import json
import uuid

import pytest
from support.medbench_pool import write_pool

from tasks_lib.ledger import medbench as ledger
from tasks_lib.medbench import accounts
from tasks_lib.medbench.splits import make_split
from tasks_lib.medbench.submissions import MAX_REPORTED, UploadRejected, submit_upload
from tasks_lib.storage import Storage


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_pool(Storage(str(tmp_path_factory.mktemp("mbpapercut") / "v1")))


def _refusal(body: list[str], who: accounts.Submitter) -> UploadRejected:
    with pytest.raises(UploadRejected) as caught:
        submit_upload("\n".join(body).encode(), "preds.jsonl", who, "v1")
    return caught.value


@pytest.mark.parametrize("first", ["sp000000000000-0123456789", "zz"])
def test_an_unknown_first_id_is_one_bad_line_among_the_others(pool: str, first: str) -> None:
    """One line per split id: the unknown one sorts before the real split's id (``sp0…``, or
    no split id at all) and comes first, yet the real split is found and every line checked."""
    who = accounts.ensure_submitter("pc" + uuid.uuid4().hex[:8])
    split = make_split(pool, who.name, seed=3)
    good = split.items[0].item_id
    caught = _refusal([json.dumps({"item_id": first, "answer": "A"}),
                       json.dumps({"item_id": good, "answer": None}),
                       "{not json"], who)
    got = {e.line: e.reason for e in caught.errors}
    assert sorted(got) == [1, 3] and caught.n_errors == 2
    assert got[1].startswith(f"item_id {first!r} is not an item of split {split.info.split_id}")
    assert "malformed JSON" in got[3]
    assert str(caught).startswith(f"preds.jsonl:1: item_id {first!r}")
    assert ledger.submissions(submitter=who.name) == []
    assert ledger.rate_events(who.name) == []


def test_ids_of_no_downloaded_split_are_every_one_a_bad_line(pool: str) -> None:
    who = accounts.ensure_submitter("pc" + uuid.uuid4().hex[:8])
    n = MAX_REPORTED + 5
    body = [json.dumps({"item_id": f"spffffffffff{i:02d}-0123456789", "answer": "A"})
            for i in range(n)]
    caught = _refusal(body, who)
    assert caught.n_errors == n
    assert [e.line for e in caught.errors] == list(range(1, MAX_REPORTED + 1))
    assert all("belongs to no downloaded split" in e.reason for e in caught.errors)
    assert f"+{n - 5} more bad lines" in str(caught)
    assert ledger.submissions(submitter=who.name) == []
