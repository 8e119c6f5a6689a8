"""The paired MedBench report (:mod:`tasks_lib.medbench.report_pair`) as markdown and as an HTML
page beside the static site of its two runs (``medflows report medbench --pair … --html DIR``)."""

from __future__ import annotations

from pathlib import Path

from tasks_lib.medbench.report_pair import MedBenchPair, PairRow, PairSide

LEGEND = ("Δ = agent − base on the paired items. 95 % CI: paired bootstrap percentile interval "
          "of Δ (base questions resampled within tasks, the shuffles of a question together; "
          "task → dimension → overall recomputed for both runs on the same resamples). p: "
          "two-sided paired bootstrap p of Δ = 0; p (Holm): adjusted over the dimensions "
          "(overall is not in the family); *: significant at α = {alpha:g} (dimensions: "
          "the Holm-adjusted p; overall: its own p).")
"""Legend under the table (``alpha`` filled in)."""
SHOWN = 20
"""Item ids listed per kind in the markdown (all are in ``--json``)."""


def _num(value: float | None, digits: str = ".1f") -> str:
    return "–" if value is None else format(value, digits)


def interval(row: PairRow) -> str:
    """``[low, high]`` of the difference, or ``–``."""
    if row.ci_low is None or row.ci_high is None:
        return "–"
    return f"[{row.ci_low:+.1f}, {row.ci_high:+.1f}]"


def _answered(row: PairRow) -> str:
    return f"{row.only_base_answered} / {row.only_agent_answered} / {row.neither_answered}"


def _side(role: str, s: PairSide) -> str:
    how = "" if s.resolved == "run id" else f" (newest scored run of {s.given})"
    note = "" if s.ranked else f"; not ranked: {s.note}"
    return (f"- {role}: `{s.run_id}`{how}: agent {s.agent_id}, backbone {s.backbone or '?'}, "
            f"{s.status}, {s.pool_id} v{s.pool_version}, {s.evaluator_version}, card overall "
            f"{_num(s.overall)}{note}")


def _ids(label: str, ids: list[str]) -> list[str]:
    if not ids:
        return []
    more = f" … (+{len(ids) - SHOWN}, all in --json)" if len(ids) > SHOWN else ""
    return [f"{label} ({len(ids)}): " + ", ".join(ids[:SHOWN]) + more]


def to_markdown(pair: MedBenchPair) -> str:
    """The sides, the table (overall first, then each dimension) and what was not paired."""
    match = {True: "same", False: "DIFFERENT", None: "unknown"}[pair.backbone_match]
    lines = [f"# MedBench paired report: {pair.base.agent_id} vs {pair.agent.agent_id} "
             f"on {pair.pool_id}", "", _side("base", pair.base), _side("agent", pair.agent),
             f"- backbone: {match}", "",
             "| scope | items | questions | base | agent | Δ | 95 % CI of Δ | p | p (Holm) | "
             "answered only by base / only by agent / neither |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in [pair.overall, *pair.dimensions]:
        mark = " *" if row.significant else ""
        p = _num(row.p_value, ".2g") + (mark if row.scope == "overall" else "")
        holm = "–" if row.scope == "overall" else _num(row.p_adjusted, ".2g") + mark
        lines.append(f"| {row.scope} | {row.n_items} | {row.n_questions} | {row.base:.1f} | "
                     f"{row.agent:.1f} | {row.difference:+.1f} | {interval(row)} | {p} | "
                     f"{holm} | {_answered(row)} |")
    lines += ["", LEGEND.format(alpha=pair.statistics.alpha),
              f"Resamples {pair.statistics.n_resamples}, seed {pair.statistics.seed}."]
    reasons = [f"{r.scope}: no interval and no test: {r.reason}"
               for r in [pair.overall, *pair.dimensions] if r.reason]
    extra = [*(f"Warning: {w}" for w in pair.warnings), *pair.notes, *reasons,
             *_ids("Only in base's pool version (not paired)", pair.only_in_base),
             *_ids("Only in agent's pool version (not paired)", pair.only_in_agent),
             *_ids("Answered only by base", pair.only_base_answered),
             *_ids("Answered only by agent", pair.only_agent_answered)]
    if extra:
        lines += ["", *(f"- {e}" for e in extra)]
    return "\n".join(lines) + "\n"


def page_name(pair: MedBenchPair) -> str:
    """The pair page's path in the site."""
    from urllib.parse import quote

    return (f"medbench/pair-{quote(pair.base.run_id, safe='')}--"
            f"{quote(pair.agent.run_id, safe='')}.html")


def write_html(pair: MedBenchPair, out_dir: str | Path) -> Path:
    """Write the static site of the two runs (:func:`tasks_lib.web.site.write_site`) and the
    pair page linking to their run pages into ``out_dir``; returns the pair page."""
    from tasks_lib.web.pages import page_path, render
    from tasks_lib.web.site import write_site

    site = write_site(out_dir, run_ids=[pair.base.run_id, pair.agent.run_id])
    linked = {r for r in (pair.base.run_id, pair.agent.run_id)
              if page_path("run", r) in site.pages}
    path = page_name(pair)
    target = Path(out_dir) / path
    target.parent.mkdir(parents=True, exist_ok=True)
    title = f"MedBench pair: {pair.base.agent_id} vs {pair.agent.agent_id}"
    target.write_text(render("medbench_pair.html", path, title=title, served=False, pair=pair,
                             rows=[pair.overall, *pair.dimensions], linked=linked,
                             interval=interval, legend=LEGEND.format(alpha=pair.statistics.alpha)),
                      encoding="utf-8")
    return target
