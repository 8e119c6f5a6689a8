"""challenge (ReX-MLE): grade a submission folder → rank it among the human leaderboard → judge
the run's trace for winning strategies (optional) → artifact; and a benchmark rank over several
challenge results."""

from __future__ import annotations

from pathlib import Path

from prefect import flow
from prefect.artifacts import create_markdown_artifact
from pydantic import Field

from evaluators.judges.capability import RunCapability
from evaluators.rounding import round_half_up
from flows import compose
from tasks_lib.artifacts import artifact_key
from tasks_lib.challenge.grade import GradeReport, grade_step
from tasks_lib.challenge.judge import judge_run_step
from tasks_lib.challenge.rank import BenchmarkReport, ChallengeResult, RankReport, rank_benchmark
from tasks_lib.domain import Frozen, Track

compose()  # every kit registered, also when a deployment loads this module


class ChallengeGrade(Frozen):
    """What the grade-and-rank flow produced."""

    grade: GradeReport = Field(description="Metrics and leaderboard placement (the CLI output).")
    capability: RunCapability | None = Field(
        default=None, description="Capability-judge verdicts of the trace (None without one).")


@flow(name="challenge-grade-rank", flow_run_name="grade-{challenge}", log_prints=True)
def challenge_grade_rank(challenge: str, submission: Path, reference: Path,
                         trace: Path | None = None, agent_id: str = "agent",
                         run_id: str | None = None, judge_model: str | None = None
                         ) -> ChallengeGrade:
    """Grade a submission folder against the private reference folder, rank it on the
    challenge's human leaderboard (invalid → percentile 0) and, given the run's trace, judge which
    winning strategies it shows (``run_id`` defaults to the submission folder's name)."""
    run_id = run_id or submission.name
    grade = grade_step(challenge, submission, reference)
    capability = (judge_run_step(trace, run_id, agent_id, challenge, judge_model)
                  if trace is not None else None)
    create_markdown_artifact(key=artifact_key(f"grade-{challenge}-{run_id}"),
                             markdown=_grade_markdown(grade, capability),
                             description=f"Challenge {challenge}: {run_id}")
    print(f"{challenge}: {run_id} percentile {_pct(grade.rank.percentile)}"
          + (f" ({grade.invalid_reason})" if grade.invalid_reason else ""))
    return ChallengeGrade(grade=grade, capability=capability)


@flow(name="challenge-benchmark-rank", flow_run_name="benchmark-rank", log_prints=True)
def challenge_benchmark_rank(results: list[ChallengeResult]) -> BenchmarkReport:
    """Rank every attempted challenge and average the percentiles (failures count 0)."""
    report = rank_benchmark(results)
    create_markdown_artifact(key="challenge-benchmark-rank", markdown=_benchmark_markdown(report),
                             description=f"Benchmark rank over {len(results)} challenges")
    print(f"benchmark rank {_pct(report.benchmark_rank)} over {len(results)} challenges")
    return report


def _pct(value: float) -> str:
    return f"{round_half_up(value * 100, 1):.1f} %"


def _mean(rank: RankReport) -> str:
    return "failed" if rank.mean_rank is None else f"{rank.mean_rank:g}"


def _grade_markdown(grade: GradeReport, capability: RunCapability | None) -> str:
    """The rank (per metric value and position), the invalid reason, the judged strategies."""
    lines = [f"# {grade.challenge}: percentile {_pct(grade.rank.percentile)}", "",
             f"N = {grade.rank.n_competitors} human competitors, mean rank "
             f"{_mean(grade.rank)}, {grade.n_cases} cases graded.", ""]
    if grade.invalid_reason:
        lines += [f"**Invalid submission:** {grade.invalid_reason}", ""]
    if grade.metrics:
        lines += ["| metric | value | position |", "|---|---:|---:|"]
        lines += [f"| {name} | {value:.4f} | {grade.rank.positions[name]} |"
                  for name, value in grade.metrics.items()]
    if capability is not None:
        shown = [s for s, score in capability.scores.items() if score]
        lines += ["", f"## Winning strategies in the trace: {len(shown)}", ""]
        lines += [f"- **{s}**: {capability.evidence[s]}" for s in shown]
        if capability.failed_sections:
            lines += [f"- sections {capability.failed_sections} failed after retries; the "
                      "verdicts cover the other sections only"]
    return "\n".join(lines) + "\n"


def _benchmark_markdown(report: BenchmarkReport) -> str:
    lines = [f"# Benchmark rank {_pct(report.benchmark_rank)}", "",
             "| challenge | N | mean rank | percentile |", "|---|---:|---:|---:|"]
    lines += [f"| {r.challenge} | {r.n_competitors} | {_mean(r)} | {_pct(r.percentile)} |"
              for r in report.challenges]
    return "\n".join(lines) + "\n"


@flow(name="construct-challenge", flow_run_name="construct-challenge-{task_id}", log_prints=True)
def construct_challenge(task_id: str, out: str | None = None, seed: int = 0,
                        audit_override: str | None = None, release: str | None = None) -> str:
    """Build a challenge card's pool: its synthetic case (test seed ``seed``, validation seed
    ``seed + 1``), or with ``release`` the official release folder split as ReX-MLE splits it
    (``medflows challenge prepare``), as public inputs, sample submission, validation split and
    local metric, the test answers private → write (vN) (the challenge kit's
    :meth:`~tasks_lib.tracks.challenge.ChallengeKit.build`) → exploit audit (publish gate,
    ``audit.json``) → ledger. Returns the URL of the version's ``manifest.json``."""
    from tasks_lib.imaging.types import PoolManifest
    from tasks_lib.pool_publish import publish_version
    from tasks_lib.tracks.base import BuildRequest, kit_for

    options = {"release": release} if release is not None else {}
    built = kit_for(Track.CHALLENGE).build(BuildRequest(tasks=[task_id], out=out, seed=seed,
                                                        options=options))
    url, manifest = built.url, built.manifest
    assert isinstance(manifest, PoolManifest)
    publish_version(url, manifest, audit_override, len(manifest.cases))
    kind = "official release" if release is not None else "synthetic, illustrative"
    print(f"built {task_id} v{manifest.version}: {len(manifest.cases)} test cases ({kind})")
    return f"{url.rstrip('/')}/manifest.json"
