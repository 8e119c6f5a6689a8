"""Papercut (issue #26): ``POST /v1/splits`` with ``{"subset": "active:<id>"}`` (the form the
docs use everywhere) answered ``submitter: invalid name``; it now names the subset's active
version like the bare id does, and a malformed subset is a 422 naming ``subset``. In process
(FastAPI's test client), on the hand-written MedBench pool of ``support.medbench_pool``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import NamedTuple

import pytest
from fastapi.testclient import TestClient
from support.medbench_pool import activate_subset_of, write_pool

from tasks_lib.medbench import accounts
from tasks_lib.medbench.service import create_app
from tasks_lib.storage import Storage


class Env(NamedTuple):
    client: TestClient
    key: str
    subset_id: str


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    pool_id = "mbpc" + uuid.uuid4().hex[:6]
    pool = write_pool(Storage(str(tmp_path_factory.mktemp("mbpc") / "v1")), pool_id=pool_id)
    subset_id = pool_id + "-rotation"
    activate_subset_of(pool, subset_id, size=5)
    key = accounts.register("pc" + uuid.uuid4().hex[:8]).api_key
    with TestClient(create_app(lambda _: None, None), raise_server_exceptions=False) as client:
        yield Env(client, key, subset_id)


def _split(env: Env, subset: str) -> tuple[int, dict[str, object]]:
    r = env.client.post("/v1/splits", json={"subset": subset, "seed": 1},
                        headers={"X-API-Key": env.key})
    return r.status_code, r.json()


def test_the_active_form_and_the_bare_id_name_the_same_subset(env: Env) -> None:
    status, active = _split(env, f"active:{env.subset_id}")
    assert status == 201, active
    status, bare = _split(env, env.subset_id)
    assert status == 201, bare
    for got in (active, bare):
        split = got["split"]
        assert isinstance(split, dict)
        assert (split["pool_id"], split["pool_version"], split["n_items"]) == (
            env.subset_id, 1, 6)


@pytest.mark.parametrize("bad", ["active:../../etc", "../../etc", "active:", "active:a b",
                                 "active:-x"])
def test_a_malformed_subset_is_a_422_naming_the_subset(env: Env, bad: str) -> None:
    status, body = _split(env, bad)
    assert status == 422
    assert str(body["detail"]).startswith(f"subset: invalid subset id {bad[7:]!r}"
                                          if bad.startswith("active:") else
                                          f"subset: invalid subset id {bad!r}")


def test_an_overlong_subset_is_refused_on_the_subset_field(env: Env) -> None:
    status, body = _split(env, "x" * 101)
    assert status == 422
    detail = str(body["detail"])
    assert "subset: invalid subset id 'xxxx" in detail and "…" in detail


def test_an_unknown_subset_names_it(env: Env) -> None:
    status, body = _split(env, "active:no-such-subset")
    assert status == 422 and "no-such-subset" in str(body["detail"])
    assert "no active version" in str(body["detail"])
