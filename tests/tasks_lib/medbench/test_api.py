"""API mode: the prompt a model is sent and how its reply becomes an answer, by answer type."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks_lib.medbench.api import extract, messages
from tasks_lib.medbench.items import PublicItem


def _item(kind: str, **extra: object) -> PublicItem:
    return PublicItem.model_validate({"item_id": "t/1", "task_id": "t", "dimension": "MLU",
                                      "specialty": "x", "answer_type": kind, "prompt": "Q?",
                                      "answer_schema": "SCHEMA", **extra})


@pytest.mark.parametrize(("kind", "reply", "answer"), [
    ("single_choice", "Reasoning\nAnswer: C", "Reasoning\nAnswer: C"),  # letter rule at scoring
    ("open_ended", "free text", "free text"),
    ("string", "\n  2004-01-19  \nbecause…", "2004-01-19"),
    ("multi_label", 'Labels: ["left mass", "normal"].', ["left mass", "normal"]),
    ("extraction", 'x [["Modality", "CT"], ["Rows", 128]] y', [["Modality", "CT"],
                                                               ["Rows", "128"]]),
    ("region", "[[1, 2, 3, 4], [5, 6], [true, 1, 2, 3]]", [[1.0, 2.0, 3.0, 4.0]]),
    ("region", "no boxes here", None),
    ("extraction", "Order: [[1, 3], [\"2\", \"1\"]]", [["1", "3"], ["2", "1"]]),  # MedSeqIm
    ("multi_label", "Errors: [\"wrong side\"]", ["wrong side"]),  # MedQC
    ("multi_label", "The draft is correct: []", []),
    ("string", "SE 1 IM 38 W 350 L 50 5.0 mm\n(read top left)", "SE 1 IM 38 W 350 L 50 5.0 mm"),
    ("multi_label", "[unclosed", None),
])
def test_extract(kind: str, reply: str, answer: object) -> None:
    assert extract(_item(kind), reply) == answer


def test_messages_show_options_schema_and_image(tmp_path: Path) -> None:
    import numpy as np

    from tasks_lib.imaging.codecs import png_bytes
    from tasks_lib.storage import Storage

    text = messages(_item("single_choice", options={"A": "yes", "B": "no"}), str(tmp_path))
    user = text[-1]["content"]
    assert isinstance(user, str) and "Q?" in user and "A. yes\nB. no" in user
    assert user.endswith("Answer format: SCHEMA") and text[0]["role"] == "system"
    Storage(str(tmp_path)).write_bytes("public/images/x.png", png_bytes(np.zeros((4, 4),
                                                                                dtype=np.uint8)))
    parts = messages(_item("region", image="public/images/x.png"), str(tmp_path))[-1]["content"]
    assert parts[0]["type"] == "text"
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
