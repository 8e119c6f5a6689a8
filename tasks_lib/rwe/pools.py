"""Find and read the published RWE study pool a run uses (run side; the pool files and their
loader are :mod:`tasks_lib.rwe.types`)."""

from __future__ import annotations

from typing import NamedTuple

from evaluators.graders.rwe_answers import QuestionTree
from tasks_lib.errors import InputDataError
from tasks_lib.ledger import store
from tasks_lib.rwe.pool_files import RWEPoolManifest, load_study_pool
from tasks_lib.rwe.questions import question_tree
from tasks_lib.rwe.types import PublicStudy, StudyAnswers
from tasks_lib.storage import Storage

BUILD = "medflows pool build rwe --seed S --out DIR"


class LoadedStudy(NamedTuple):
    """One study of a published pool, with its private reference answers."""

    pool_url: str
    manifest: RWEPoolManifest
    study: PublicStudy
    key: StudyAnswers
    tree: QuestionTree


def rwe_pool_urls() -> list[str]:
    """Root URLs of every published RWE pool version in the ledger, newest first."""
    rows = sorted(store.pools(track="rwe", kind="pool"), key=lambda r: r.created_at,
                  reverse=True)
    return [r.manifest_url.removesuffix("/manifest.json") for r in rows]


def find_pool(study_id: str) -> str:
    """The newest published RWE pool that holds ``study_id`` (it must be usable:
    :func:`tasks_lib.pool_lock.require_usable`)."""
    from tasks_lib.pool_lock import require_usable

    for url in rwe_pool_urls():
        manifest = load_study_pool(Storage(url), private=False).manifest
        if study_id in manifest.studies:
            require_usable(url)
            return url
    raise InputDataError(f"study {study_id}", f"no published RWE pool holds it; build one with: "
                                              f"{BUILD}")


def is_rwe_study(task_id: str) -> bool:
    """Whether ``task_id`` names an RWE study card (``datasets/rwe/<task_id>/``)."""
    from tasks_lib.settings import get_settings

    return (get_settings().datasets_dir / "rwe" / task_id / "study.yaml").is_file()


def load_study(study_id: str, pool_url: str | None = None) -> LoadedStudy:
    """Study ``study_id`` of ``pool_url`` (default: the newest pool holding it)."""
    url = pool_url or find_pool(study_id)
    pool = load_study_pool(Storage(url))
    study = next((s for s in pool.studies if s.study_id == study_id), None)
    key = pool.answers.get(study_id)
    if study is None or key is None:
        raise InputDataError(url, f"the pool has no study {study_id!r} (it has "
                                  f"{', '.join(pool.manifest.studies)})")
    return LoadedStudy(url, pool.manifest, study, key, question_tree(study, key))
