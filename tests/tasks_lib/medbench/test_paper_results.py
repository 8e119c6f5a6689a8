"""The numbers MedBench v4 reports (spec §10) as data, and the only arithmetic they allow."""

from __future__ import annotations

import yaml

from tasks_lib.settings import get_settings


def test_reported_numbers_and_their_arithmetic() -> None:
    data = yaml.safe_load((get_settings().datasets_dir / "medbench" / "paper_results.yaml")
                          .read_text())
    numbers = [v for group in data.values() for v in group.values()]
    assert len(numbers) == 17
    assert round(data["agent"]["mean_overall"] - data["llm"]["mean_overall"], 1) == 25.7
    assert round(data["agent"]["safety_mean"] - data["llm"]["hse_mean"], 1) == 55.0
    # overall = mean of 5 dimensions ⇒ implied mean MLU in [72.1, 78.1] (spec §10, [D])
    low, high = data["llm"]["knowledge_generation_reasoning_range"]
    implied = [round(5 * data["llm"]["mean_overall"] - data["llm"]["hse_mean"] - 3 * k, 1)
               for k in (high, low)]
    assert implied == [72.1, 78.1]
