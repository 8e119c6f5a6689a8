"""Human-readable summaries of QA pools (Prefect artifacts, CLI)."""

from __future__ import annotations

from tasks_lib.qa.types import PoolManifest


def manifest_markdown(m: PoolManifest) -> str:
    """Counts per dataset, rejects, PHI replacements and review decisions as markdown."""
    lines = [
        f"# Pool `{m.pool_id}` v{m.version}",
        "",
        f"content hash `{m.content_hash[:16]}…`, rule `{m.selection.get('rule')}`, "
        f"{sum(d.n_items for d in m.datasets.values())} items",
        "",
        "| dataset | ingested | rejected | hard | withheld | in pool |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {ds} | {d.n_ingested} | {d.n_rejected} | {d.n_hard} | {d.n_withheld} | {d.n_items} |"
        for ds, d in m.datasets.items()
    ]
    phi = ", ".join(f"{k}: {v}" for k, v in sorted(m.deid.items())) or "none"
    lines += ["", f"PHI replacements: {phi}", "", f"MELD: {m.meld}", ""]
    if m.review:
        rejected = [k for k, v in m.review.decisions.items() if v == "reject"]
        lines.append(f"Review by **{m.review.reviewer}**: {m.review.comment or '(no comment)'}; "
                     f"{len(m.review.decisions)} flagged, {len(rejected)} withheld")
    return "\n".join(lines) + "\n"
