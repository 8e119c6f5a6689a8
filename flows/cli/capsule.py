"""``medflows export`` and ``medflows import``: replay capsules (docs/capsules.md). A capsule
carries runs (or a pool version) with everything the one score flow and the execute path read, so
someone else re-scores them offline and re-executes their model calls from the call cache."""

from __future__ import annotations

from pathlib import Path

import typer

from flows.cli.groups import app, fail, split_list, user_errors
from flows.cli.output import echo_json


@app.command("export")
@user_errors()
def export_cmd(
    run: str = typer.Option(None, "--run", help="Run id(s), comma-separated (see: medflows "
                                                "runs list)."),
    pool: str = typer.Option(None, "--pool", help="POOL (newest published version) or "
                                                  "POOL@vN: the version and every run on it."),
    report: str = typer.Option(None, "--report", help="Pool or task id: the scored runs its "
                                                      "leaderboard ranks."),
    out: Path = typer.Option(..., "--out", help="Capsule file: .tar, .tar.gz/.tgz or .zip."),
    with_pool_files: bool = typer.Option(
        False, "--with-pool-files", help="Carry the pool files too (public view AND private "
        "references): the capsule re-scores anywhere and is private. Without: only the "
        "pool's manifest; the importer must hold the same pool content."),
) -> None:
    """Write one replay capsule (runs, submissions, traces, call-cache replies, score cards,
    cards, pool manifest) with a sha256 per member; prints a JSON summary."""
    from tasks_lib.capsule.archive import file_sha256
    from tasks_lib.capsule.export import export_capsule, select

    selection = select(split_list(run), pool, report)
    target = out.resolve()
    manifest = export_capsule(target, selection, with_pool_files)
    if manifest.private:
        typer.echo(f"note: {target} holds private pool references: share it only with whom may "
                   "see them", err=True)
    echo_json({"capsule": str(target), "capsule_sha256": file_sha256(target),
               "format": manifest.format, "scope": manifest.scope, "private": manifest.private,
               "runs": [r.run_id for r in manifest.runs],
               "pools": [f"{p.pool_id}@v{p.version}" for p in manifest.pools],
               "cards": manifest.cards, "members": len(manifest.members),
               "call_cache_entries": manifest.call_cache_entries,
               "call_cache_missing": manifest.call_cache_missing,
               "evaluator_versions": manifest.evaluator_versions})


@app.command("import")
@user_errors()
def import_cmd(
    capsule: Path = typer.Argument(..., help="Capsule file written by medflows export."),
    rescore: bool = typer.Option(
        False, "--rescore", help="Then score the imported runs with the score flow and compare "
        "each card with the capsule's (exit 1 if one differs)."),
) -> None:
    """Check every member's hash, then add the capsule's pools, runs and call-cache replies to
    this storage root and ledger (score cards are recomputed here: medflows score --run …);
    prints a JSON summary."""
    from tasks_lib.capsule.restore import import_capsule

    imported = import_capsule(capsule.resolve())
    result = imported.summary.model_dump(mode="json")
    if not rescore or not imported.summary.runs:
        echo_json(result)
        return
    from flows.score import score_runs
    from tasks_lib.capsule.restore import differences
    from tasks_lib.records import read_card

    checks, differ = [], []
    for summary in score_runs(run_ids=imported.summary.runs):
        assert summary.run_id is not None
        claimed = imported.claims[summary.run_id].get(summary.evaluator_version)
        fields = None
        if claimed is not None:
            fields = differences(claimed, read_card(summary.run_id, summary.evaluator_version))
            if fields:
                differ.append(summary.run_id)
        checks.append({"run_id": summary.run_id, "evaluator_version": summary.evaluator_version,
                       "reproduced": None if fields is None else not fields,
                       "differences": fields or []})
    echo_json({**result, "rescored": checks})
    if differ:
        raise fail(f"score cards differ from the capsule's for {', '.join(differ)}", code=1)
