"""Imaging commands: ``pool build imaging``, ``score submission``, ``baseline``."""

from __future__ import annotations

from pathlib import Path

import typer

from evaluators.vocabulary import Track
from flows.cli.groups import app, build_app, location, score_app, user_errors
from flows.cli.output import echo_json
from flows.cli.routing import BUILD_ROUTES, EXECUTE_ROUTES, Route
from tasks_lib.errors import InputDataError
from tasks_lib.imaging.baseline_kind import BaselineKind


def _imaging_tracks() -> list[str]:
    """The kits this module's commands serve (the imaging kits)."""
    from tasks_lib.imaging.registry import imaging_tracks

    return imaging_tracks()


def _shipped_imaging_tracks() -> list[str]:
    """The imaging kits whose cards ship in ``datasets/<track>/`` (what ``pool build imaging
    --task`` builds); an imaging-like kit keeping its cards elsewhere (a kit outside the tree)
    is built by ``pool build --task`` through the generic ``construct`` flow."""
    from tasks_lib.imaging.registry import imaging_kit, imaging_tracks

    return [t for t in imaging_tracks() if imaging_kit(t).cards_root is None]


BUILD_ROUTES.add("imaging", Route(("pool", "build", "imaging"), _shipped_imaging_tracks,
                                  "--task"))
EXECUTE_ROUTES.add("imaging", Route(("execute", "cells"), _imaging_tracks))


def pool_url(task_id: str, pool: str | None) -> str:
    """The pool URL: ``--pool``, or the task's newest built version (never built here)."""
    from tasks_lib.imaging.pool import latest_pool_url

    return location(pool) if pool else latest_pool_url(task_id)


@build_app.command("imaging")
@user_errors()
def build_imaging(
    task: str = typer.Option(None, "--task", help="Shipped imaging task id (see "
                                                  "datasets/<track>/)."),
    from_dir: Path = typer.Option(None, "--from", help="Your folder of images and labels "
                                  "(layout: docs/imaging.md, 'Bring your own data'), or your "
                                  "download of a public release (with --layout, or with "
                                  "--task naming a public-release card)."),
    track: str = typer.Option(None, "--track", help="With --from: segmentation | detection | "
                                                    "vqa | report_generation (with --layout: "
                                                    "the layout's track, the default)."),
    layout: str = typer.Option(None, "--layout", help="With --from: the folder is a public "
                               "release in this layout: msd | nnunetv2 | pants | feta | "
                               "vindr-cxr | slake | vqa-rad | mimic-cxr (docs/imaging.md, "
                               "'Bringing the public releases')."),
    task_id: str = typer.Option(None, "--task-id", help="With --from: the task id (default: "
                                                        "the folder's name)."),
    out: str = typer.Option(None, help="Pool root folder/URL (default: pools/<task>/vN in the "
                                       "storage root)."),
    audit_override: str = typer.Option(
        None, help="Publish even if the exploit audit is not clean; the reason is recorded in "
        "the pool's audit.json (see docs/audit.md)."),
    as_json: bool = typer.Option(False, "--json", help="Print the full summary (cases, "
                                                       "de-identification, content hash)."),
) -> None:
    """Build an imaging pool (public view + private references) from a shipped task card or
    from your own folder; it is published (ledgered) only after a clean exploit audit. Prints
    JSON."""
    from flows.construct import construct_imaging
    from tasks_lib.imaging.pool import load_task, read_manifest

    if task is None and from_dir is None:
        raise InputDataError("--task/--from", "give a shipped task id or a folder")
    if from_dir is None:
        if track or task_id or layout:
            raise InputDataError("--track/--task-id/--layout", "only with --from (a shipped "
                                                               "card names its own)")
        from tasks_lib.imaging.dataset import require_generated

        require_generated(load_task(task))
        manifest = construct_imaging(task, location(out) if out else None, audit_override)
    else:
        manifest = _build_from_folder(from_dir, track, _folder_task(task, task_id, layout),
                                      layout, out, audit_override)
    m = read_manifest(manifest.removesuffix("/manifest.json"))
    summary: dict[str, object] = {"task_id": m.task_id, "track": m.track.value,
                                  "version": m.version, "n_cases": len(m.cases),
                                  "manifest": manifest}
    if as_json:
        summary |= {"content_hash": m.content_hash, "labels": m.labels, "classes": m.classes,
                    "deid": m.deid.model_dump(),
                    "cases": [{"case_id": c.case_id, "shape": c.shape, "spacing": c.spacing,
                               "origin": c.origin} for c in m.cases]}
    echo_json(summary)


def _folder_task(task: str | None, task_id: str | None, layout: str | None) -> str | None:
    """The task id of a ``--from`` build: ``--task`` only for a public-release card (the folder
    is the user's download of it), else ``--task-id`` (default: the folder's name)."""
    from tasks_lib.imaging.dataset import release_card

    if task is None:
        return task_id
    if task_id is not None:
        raise InputDataError("--task/--task-id", "give one: --task names a public-release card, "
                                                 "--task-id your folder's task")
    if release_card(task, layout) is None:
        raise InputDataError("--task", f"{task} is generated from its card, not built from a "
                                       "folder; drop --from (or use --task-id for your own "
                                       "folder's task)")
    return task


def _build_from_folder(folder: Path, track: str | None, task_id: str | None,
                       layout: str | None, out: str | None, audit_override: str | None) -> str:
    """Check the folder in full here (one error line, no flow, nothing written), then run
    construct, whose ingest and validate steps read it again."""
    from flows.construct import construct_imaging
    from tasks_lib.imaging.checks import check_rendered
    from tasks_lib.imaging.dataset import folder_tracks, release_card
    from tasks_lib.imaging.intake import folder_task_card, ingest_card
    from tasks_lib.imaging.releases import as_layout, release_track

    shipped = release_card(task_id, layout) if task_id else None
    if shipped is not None and track not in (None, shipped.track.value):
        raise InputDataError("--track", f"{task_id} is a {shipped.track.value} task")
    if track is None and (layout is not None or shipped is not None):
        track = (shipped.track if shipped else release_track(layout)).value
    names = [t.value for t in folder_tracks()]
    if track not in names:
        raise InputDataError("--track", f"{track!r}: a folder is ingested as one of "
                                        f"{', '.join(names)}")
    root = folder.resolve()
    card = folder_task_card(root, Track(track), task_id, as_layout(layout))
    check_rendered(card.track, ingest_card(card, root))
    return construct_imaging(card.task_id, location(out) if out else None, audit_override,
                             from_dir=str(root), track=card.track.value, layout=layout)


@score_app.command("submission")
@user_errors()
def score_submission_cmd(
    task: str = typer.Option(..., "--task", help="Imaging task id."),
    submission: str = typer.Option(..., help="Submission folder."),
    pool: str = typer.Option(None, help="Pool root (default: the task's newest version)."),
    as_json: bool = typer.Option(False, "--json", help="Print the full score card as JSON."),
) -> None:
    """Score one submission folder: stored as an upload run, scored by the score DAG."""
    from flows.score import score_submission
    from tasks_lib.imaging.pool import load_task, read_manifest
    from tasks_lib.uploads import check_folder

    card_spec = load_task(task)
    url = pool_url(task, pool)
    m = read_manifest(url)
    if m.task_id != task or m.track != card_spec.track:
        raise InputDataError(url, f"this is a pool of task {m.task_id!r} ({m.track.value}), "
                                  f"not of {task!r}; pass that task's pool (or none for its "
                                  "newest version)")
    check_folder(Path(submission))  # a missing or symlinked folder: one error line, no flow
    card = score_submission(task, str(Path(submission).absolute()), url)
    if as_json:
        echo_json(card.public_json(), sort_keys=True)
        return
    ok = card.validation is not None and card.validation.ok
    typer.echo(f"{card.task_id}: run {card.run_id} task_score={card.task_score} s4={card.s4} "
               f"s5={card.s5} validation={'ok' if ok else 'FAILED'}")


@app.command("baseline")
@user_errors()
def baseline_cmd(
    task: str = typer.Option(..., "--task", help="Imaging task id."),
    kind: BaselineKind = typer.Option(..., help="perfect | empty | constant | classical."),
    out: Path = typer.Option(..., help="Submission folder to write."),
    pool: str = typer.Option(None, help="Pool root (default: the task's newest version)."),
) -> None:
    """Write a baseline submission (validate evaluators with it before real runs)."""
    from tasks_lib.imaging.baselines import write_baseline
    from tasks_lib.imaging.pool import load_task

    load_task(task)
    files = write_baseline(kind, pool_url(task, pool), out)
    echo_json({"task_id": task, "kind": kind.value, "submission": str(out.resolve()),
               "files": len(files)})
