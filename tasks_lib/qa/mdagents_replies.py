"""Reading MDAgents' replies as the paper does: the assessor's difficulty route, the recruiter's
experts (intermediate) and MDTs (advanced), and which MDTs are the initial-assessment and the
review/decision teams. Unparseable recruiter lines and teams without members are skipped (see
:mod:`tasks_lib.qa.mdagents`).
"""

from __future__ import annotations

import re

INITIAL = re.compile(r"initial|iap", re.IGNORECASE)
REVIEW = re.compile(r"review|decision|frdt", re.IGNORECASE)


def route_of(reply: str) -> str:
    """The paper's keyword read of the difficulty reply (none → basic)."""
    low = reply.lower()
    for route, number in (("basic", "1)"), ("intermediate", "2)"), ("advanced", "3)")):
        if route in low or number in low:
            return route
    return "basic"


def parse_experts(recruited: str) -> list[tuple[str, str]]:
    """``(role, description)`` (lower-cased) of each ``N. Role - description - Hierarchy: …`` line;
    other lines are skipped."""
    experts = []
    for line in filter(None, recruited.split("\n")):
        entry = line.split(" - Hierarchy: ")[0]
        dashed = entry.split("-")
        numbered = dashed[0].split(".")
        if len(dashed) < 2 or len(numbered) < 2:
            continue
        experts.append((numbered[1].strip().lower(), dashed[1].strip().lower()))
    return experts


def parse_teams(recruited: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """``(goal, [(role, expertise)])`` of each ``Group k - goal`` block with ``Member j: Role -
    expertise`` lines (the paper's parse); teams without members are skipped."""
    teams = []
    for block in (b.strip() for b in recruited.split("Group")):
        if not block:
            continue
        lines = f"Group {block}".split("\n")
        goal = "".join(lines[0].split("-")[1:])
        members = []
        for line in lines[1:]:
            if line.startswith("Member") and ":" in line:
                described = line.split(":")[1].split("-")
                members.append((described[0].strip(),
                                described[1].strip() if len(described) > 1 else ""))
        if members:
            teams.append((goal, members))
    return teams
