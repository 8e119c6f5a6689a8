"""Post-run error-code coder (E1–E5): definitions as data, rule signals, LLM prompt and merge.

Diagnostic only: codes never change scores. Rule signals are deterministic reads of the trace
(tracebacks, missing submission, repeated failures...); the LLM coder adds codes with evidence
from the definitions and per-track examples in ``rubrics/error_codes.yaml``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from enum import StrEnum
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import Field, ValidationError

from evaluators.core import Frozen

RUBRICS_DIR = Path(__file__).parent / "rubrics"



class ErrorCode(StrEnum):
    """AutoMedBench error codes."""

    E1 = "E1"
    E2 = "E2"
    E3 = "E3"
    E4 = "E4"
    E5 = "E5"


class CodeDefinition(Frozen):
    """One code of the taxonomy."""

    code: ErrorCode = Field(description="E1..E5.")
    name: str = Field(description="Short name.")
    definition: str = Field(description="What fires the code.")
    examples: dict[str, list[str]] = Field(description="Track → typical occurrences.")


class Taxonomy(Frozen):
    """``rubrics/error_codes.yaml``."""

    version: str = Field(description="Taxonomy version.")
    codes: list[CodeDefinition] = Field(description="The five codes.")


class Evidence(Frozen):
    """Why a code fired."""

    code: ErrorCode = Field(description="The fired code.")
    source: str = Field(description="'rule' or 'llm'.")
    text: str = Field(description="Short quote or description from the trace.")


class Coding(Frozen):
    """Output of the coder: ``{fired, evidence, dominant}``."""

    fired: list[ErrorCode] = Field(description="Fired codes, sorted.")
    evidence: list[Evidence] = Field(description="Evidence per fired code.")
    dominant: ErrorCode | None = Field(description="The code that best explains the failure.")
    llm_error: str | None = Field(default=None, description="Why the LLM coder failed, if it did.")


class RunFacts(Frozen):
    """What the rule signals look at."""

    tool_outputs: list[str] = Field(description="Tool results in order.")
    codes_run: list[str] = Field(description="Code of each execute_code call in order.")
    workspace_files: list[str] = Field(description="Files in the workspace at the end.")
    submission_files: list[str] = Field(description="Files under the submission folder.")
    submitted: bool = Field(description="The agent called submit_results.")
    timed_out: bool = Field(description="The run hit its wall-time cap.")
    s5_valid: bool | None = Field(description="The submission passed validation (None: unknown).")


@lru_cache(maxsize=1)
def load_taxonomy() -> Taxonomy:
    """The taxonomy of ``rubrics/error_codes.yaml``."""
    return Taxonomy.model_validate(
        yaml.safe_load((RUBRICS_DIR / "error_codes.yaml").read_text(encoding="utf-8")))


_TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\w+Error: ", re.M)
_MISSING_INPUT = re.compile(r"(No such file or directory|FileNotFoundError).*?/public", re.S)
_MISSING_PKG = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")
_PILOT = re.compile(r"pilot|\[:1\]|\[0\]|head\(|first case|shape", re.I)


def rule_signals(facts: RunFacts) -> list[Evidence]:
    """Deterministic evidence from the trace and the workspace."""
    found: list[Evidence] = []
    text = "\n".join(facts.tool_outputs)
    tracebacks = [o for o in facts.tool_outputs if _TRACEBACK.search(o)]
    if tracebacks:
        last = tracebacks[-1].strip().splitlines()[-1][:200]
        found.append(Evidence(code=ErrorCode.E4, source="rule",
                              text=f"{len(tracebacks)} crashing execution(s); last: {last}"))
    if facts.timed_out:
        found.append(Evidence(code=ErrorCode.E4, source="rule", text="wall-time cap reached"))
    package = _MISSING_PKG.search(text)
    if package:
        found.append(Evidence(code=ErrorCode.E2, source="rule",
                              text=f"missing package {package.group(1)}"))
    if _MISSING_INPUT.search(text):
        found.append(Evidence(code=ErrorCode.E2, source="rule", text="input file not found"))
    if "plan.md" not in facts.workspace_files:
        found.append(Evidence(code=ErrorCode.E1, source="rule", text="no plan.md written"))
    repeats = Counter(t.strip().splitlines()[-1] for t in tracebacks if t.strip())
    if repeats and max(repeats.values()) >= 3:
        found.append(Evidence(code=ErrorCode.E3, source="rule",
                              text="the same error repeated ≥ 3 times"))
    if facts.codes_run and not any(_PILOT.search(c) for c in facts.codes_run):
        found.append(Evidence(code=ErrorCode.E3, source="rule", text="no pilot check seen"))
    if not facts.submission_files:
        found.append(Evidence(code=ErrorCode.E5, source="rule", text="empty submission"))
    if not facts.submitted:
        found.append(Evidence(code=ErrorCode.E5, source="rule", text="submit_results never called"))
    if facts.s5_valid is False:
        found.append(Evidence(code=ErrorCode.E5, source="rule",
                              text="submission failed validation"))
    return found


def build_prompt(track: str, digest: str, rules: list[Evidence]) -> list[tuple[str, str]]:
    """``(role, content)`` messages asking an LLM to code the run."""
    lines = []
    for c in load_taxonomy().codes:
        examples = "; ".join(c.examples.get(track, []))
        lines.append(f"{c.code.value} {c.name}: {c.definition} Examples: {examples or 'n/a'}")
    signals = "\n".join(f"- {e.code.value}: {e.text}" for e in rules) or "(none)"
    system = ("You code failures in AI-agent research runs. Multi-label: fire every code with "
              "evidence in the trace. Answer with one JSON object only.")
    user = ("Codes:\n" + "\n".join(lines) + f"\n\nRule signals:\n{signals}\n\nTrace:\n{digest}\n\n"
            'Reply: {"fired": ["E1", ...], "evidence": {"E1": "<quote>", ...}, '
            '"dominant": "E4" or null}')
    return [("system", system), ("user", user)]


class _LLMCoding(Frozen):
    fired: list[ErrorCode] = Field(description="Codes.")
    evidence: dict[ErrorCode, str] = Field(default_factory=dict, description="Quotes.")
    dominant: ErrorCode | None = Field(default=None, description="Main code.")


def parse_llm(reply: str) -> _LLMCoding:
    """Parse the LLM coder's JSON (raises ValueError when malformed)."""
    start, end = reply.find("{"), reply.rfind("}")
    try:
        return _LLMCoding.model_validate(json.loads(reply[start:end + 1]))
    except (json.JSONDecodeError, ValidationError) as exc:
        raise ValueError(f"error-code reply is not valid: {exc}") from None


def merge(rules: list[Evidence], llm_reply: str | None, llm_error: str | None = None) -> Coding:
    """Union of rule and LLM codes; dominant = the LLM's choice if fired, else the most-evidenced
    rule code (ties → the lower code)."""
    evidence = list(rules)
    dominant: ErrorCode | None = None
    if llm_reply is not None:
        try:
            coded = parse_llm(llm_reply)
        except ValueError as exc:
            llm_error = str(exc)
        else:
            evidence += [Evidence(code=c, source="llm", text=coded.evidence.get(c, ""))
                         for c in coded.fired]
            dominant = coded.dominant if coded.dominant in coded.fired else None
    fired = sorted({e.code for e in evidence})
    if dominant is None and rules:
        counts = Counter(e.code for e in rules)
        dominant = min(counts, key=lambda c: (-counts[c], c.value))
    return Coding(fired=fired, evidence=evidence, dominant=dominant, llm_error=llm_error)
