"""``medflows audit pool POOL``: the exploit audit of a published pool (docs/audit.md).

Exit codes: 0 the audit is clean, 1 it is not (a failed check of severity ``error``; the report
is still printed), 2 the input is wrong (no pool at ``POOL``: one ``error:`` line).
"""

from __future__ import annotations

import typer

from flows.cli.groups import app, location, user_errors
from flows.cli.output import echo_json

NOT_CLEAN = 1
"""Exit code of an audit that is not clean."""

audit_app = typer.Typer(no_args_is_help=True, help="Exploit audits of pools.")
app.add_typer(audit_app, name="audit")


@audit_app.command("pool")
@user_errors()
def audit_pool_cmd(
    pool: str = typer.Argument(..., help="Pool version root of any track (folder or URL, "
                                         "e.g. pools/<pool>/vN)."),
    judge_model: str = typer.Option(None, help="Judge of every score the audit makes (the "
                                               "baselines, the tampering probe) and the one "
                                               "probed for prompt injection (default: "
                                               "MEDFLOWS_JUDGE_MODEL; 'rules' = offline judge)."),
    sandbox: bool = typer.Option(True, "--sandbox/--no-sandbox",
                                 help="Run the egress probe in the bwrap sandbox (off: the "
                                      "finding says skipped, a warning)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as strict JSON."),
) -> None:
    """Audit a pool for benchmark exploits: null agents and the public sample (the kit's
    baselines), answer-key search, grader-input tampering, judge prompt injection, network
    egress. Exit 0 clean, 1 not clean, 2 bad input."""
    from tasks_lib.audit import audit_pool

    report = audit_pool(location(pool), judge_model=judge_model, sandbox=sandbox)
    if as_json:
        echo_json(report.to_json(), sort_keys=True)
    else:
        typer.echo(f"{report.pool_id} v{report.version} ({report.track.value}): "
                   f"{'clean' if report.clean else 'NOT CLEAN'}")
        for f in report.findings:
            mark = "ok" if f.passed else f.severity.value.upper()
            typer.echo(f"  [{mark}] {f.check}: {f.rule}")
            for line in f.evidence:
                typer.echo(f"      - {line}")
    if not report.clean:
        raise typer.Exit(NOT_CLEAN)
