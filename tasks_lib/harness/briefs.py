"""Render the agent's system prompt (rules, workflow, tier scaffolding) and first user message.

Tier scaffolding per track is data (``briefs.yaml``): Lite gives the method, pinned dependencies
and S1–S3 hints; Standard gives bounded method families and the S1 hint; Pro gives none.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import metadata
from pathlib import Path

import yaml
from pydantic import Field

from tasks_lib.domain import Frozen, Tier
from tasks_lib.harness.loop import LoopLimits

BRIEFS = Path(__file__).with_name("briefs.yaml")
SUBMISSION_DIR = "/workspace/submission"


class TierBrief(Frozen):
    """Scaffolding of one tier."""

    method: str | None = Field(default=None, description="The method to use (Lite).")
    dependencies: list[str] = Field(default_factory=list, description="Packages to pin (Lite).")
    method_families: list[str] = Field(default_factory=list, description="Allowed families.")
    hints: dict[str, str] = Field(default_factory=dict, description="Stage id → hint.")


class TrackBriefs(Frozen):
    """Per-tier scaffolding of one track (Pro has none)."""

    lite: TierBrief = Field(description="Lite tier.")
    standard: TierBrief = Field(description="Standard tier.")


class BriefCatalog(Frozen):
    """``briefs.yaml``."""

    tracks: dict[str, TrackBriefs] = Field(description="Track → scaffolding.")


@lru_cache(maxsize=1)
def load_briefs() -> BriefCatalog:
    """The scaffolding catalog."""
    return BriefCatalog.model_validate(yaml.safe_load(BRIEFS.read_text(encoding="utf-8")))


def _pin(package: str) -> str:
    try:
        return f"{package}=={metadata.version(package)}"
    except metadata.PackageNotFoundError:
        return f"{package} (not installed)"


def tier_section(track: str, tier: Tier) -> str:
    """The scaffolding paragraph of ``tier`` for ``track``."""
    if tier is Tier.PRO or track not in load_briefs().tracks:
        return "Tier: pro. Choose your own method; no further guidance."
    brief: TierBrief = getattr(load_briefs().tracks[track], tier.value)
    lines = [f"Tier: {tier.value}."]
    if brief.method:
        lines.append(f"Method to use: {brief.method}")
    if brief.dependencies:
        lines.append("Pinned dependencies (already installed): "
                     + ", ".join(_pin(p) for p in brief.dependencies))
    if brief.method_families:
        lines.append("Choose within these method families: " + "; ".join(brief.method_families))
    lines += [f"Hint {stage.upper()}: {hint}" for stage, hint in sorted(brief.hints.items())]
    return "\n".join(lines)


def system_prompt(track: str, tier: Tier, limits: LoopLimits) -> str:
    """Rules, workflow and tier scaffolding for a research agent."""
    return f"""You are an AI research agent solving a medical-imaging benchmark task in a sandbox.

Tools: execute_code(language: python|bash, code) runs code; submit_results() ends the run.
Files: /public is the read-only public view (brief.md and inputs). /workspace is yours and
writable. Put your outputs in {SUBMISSION_DIR}/ exactly as the brief's submission layout says.
Workflow: S1 plan (write /workspace/plan.md), S2 set up and check inputs, S3 validate on one
pilot case, S4 run inference on every case, S5 check the submission and call submit_results.
Rules: never read or write outside /public and /workspace; there is no network; isolation
violations are detected: the first earns a warning, the second ends the run as invalid.
Budget: {limits.max_turns} turns and {int(limits.wall_time_s)} s wall time (the process tree is
killed at the cap; only files written before it count).

{tier_section(track, tier)}
"""


def user_prompt(public_brief: str) -> str:
    """The first user message: the task's public brief."""
    return f"{public_brief.strip()}\n\nBegin with S1."
