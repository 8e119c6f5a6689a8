"""De-identification: every PHI type is replaced and counted; clinical content is untouched."""

from __future__ import annotations

import pytest

from tasks_lib.qa.deid import scrub
from tasks_lib.qa.types import PHIType


@pytest.mark.parametrize(
    ("text", "expected", "kind"),
    [
        ("Send results to jane.doe@mercy-hospital.org today.", "Send results to [EMAIL] today.",
         PHIType.EMAIL),
        ("Call (555) 123-4567 now.", "Call [PHONE] now.", PHIType.PHONE),
        ("Fax: 555.987.6543.", "[PHONE].", PHIType.PHONE),
        ("See https://records.example.org/p?id=7 for details.", "See [URL] for details.",
         PHIType.URL),
        ("MRN: 00123456 was admitted.", "[ID] was admitted.", PHIType.ID),
        ("SSN 123-45-6789 on file.", "[ID] on file.", PHIType.ID),
        ("Seen on 03/14/2015 in clinic.", "Seen on [DATE] 2015 in clinic.", PHIType.DATE),
        ("Admitted March 3, 2016.", "Admitted [DATE] 2016.", PHIType.DATE),
        ("Scan dated 2019-05-01.", "Scan dated [DATE] 2019.", PHIType.DATE),
        ("Born 4th July 1950.", "Born [DATE] 1950.", PHIType.DATE),
        ("He lives at 221 Baker Street with his wife.", "He lives at [ADDRESS] with his wife.",
         PHIType.ADDRESS),
        ("Dr. Gregory House examines him.", "Dr. [NAME] examines him.", PHIType.NAME),
        ("Mrs. Hudson brings her son.", "Mrs. [NAME] brings her son.", PHIType.NAME),
    ],
)
def test_each_phi_type(text: str, expected: str, kind: PHIType) -> None:
    scrubbed, counts = scrub(text)
    assert scrubbed == expected
    assert counts[kind] >= 1
    assert sum(counts.values()) == (2 if "MRN" in text and "SSN" in text else 1)


CLINICAL = [
    "A 67-year-old man presents with a 2-day history of fever.",
    "Blood pressure is 120/80 mm Hg and pulse 88/min.",
    "Serum sodium 140 mEq/L, potassium 3.5 mEq/L, HbA1c 7.2%.",
    "He takes metoprolol 25 mg twice daily and aspirin 81 mg.",
    "Dose 10-20 mg/kg over 3-5 days; 1/2 tablet at night.",
    "Infectious disease (ID) consult; Figure 2-1 shows the ECG.",
    "In 2015 she had a myocardial infarction; ejection fraction 35%.",
    "A 3.5-cm mass in segment 4 of the liver; AFP 400 ng/mL.",
]


@pytest.mark.parametrize("text", CLINICAL)
def test_clinical_content_survives(text: str) -> None:
    scrubbed, counts = scrub(text)
    assert scrubbed == text
    assert not counts


def test_real_questions_mostly_untouched() -> None:
    """On real exam questions replacements are rare: a sanity bound against over-scrubbing."""
    import json

    from support.paths import QA_SOURCE

    lines = (QA_SOURCE / "questions" / "medqa.test.jsonl").read_text().splitlines()[:300]
    changed = sum(bool(scrub(json.loads(line)["question"])[1]) for line in lines)
    assert changed <= 3
