"""The FastAPI shop (examples/fastapi_shop): orders and their jobs commit together, through
SQLAlchemy's session, on SQLite and PostgreSQL (cases 16 and 36)."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qsl, urlsplit

import pytest
from examples.fastapi_shop.app import Shop, make_shop
from fastapi.testclient import TestClient

from durq.testing import assert_enqueued, assert_not_enqueued, drain


@pytest.fixture
def shop(url: str) -> Iterator[Shop]:
    schema = dict(parse_qsl(urlsplit(url).query)).get("schema")
    made = make_shop(url, search_path=schema)
    try:
        yield made
    finally:
        made.dq.close()
        made.engine.dispose()


@pytest.fixture
def client(shop: Shop) -> Iterator[TestClient]:
    with TestClient(shop.api, raise_server_exceptions=False) as c:  # runs the lifespan
        yield c


def test_a_committed_request_enqueues_and_the_job_runs(shop: Shop, client: TestClient) -> None:
    placed = client.post("/orders", json={"item": "teapot"})
    assert placed.status_code == 200, placed.text
    order, job = placed.json()["order"], placed.json()["job"]
    assert_enqueued(shop.ship, order_id=order)
    assert drain(shop.dq).succeeded == [job]
    assert client.get("/orders").json() == [{"id": order, "item": "teapot", "shipped": True}]
    assert client.get(f"/jobs/{job}").json() == {
        "id": job,
        "state": "succeeded",
        "result": "teapot",
    }


def test_a_rolled_back_request_leaves_neither_order_nor_job(shop: Shop, client: TestClient) -> None:
    failed = client.post("/orders", json={"item": "vase", "fail": True})
    assert failed.status_code == 500
    assert client.get("/orders").json() == []
    assert shop.dq.jobs() == []  # case 16: the job went with the rollback
    assert drain(shop.dq).ran == []


def test_a_rolled_back_savepoint_takes_only_its_own_job(shop: Shop, client: TestClient) -> None:
    """Case 36, step 1: the inner block's job goes with its savepoint; the outer one runs."""
    kept = client.post("/orders", json={"item": "cup", "note": "happy birthday"}).json()
    refused = client.post("/orders", json={"item": "mug", "note": "x" * 50}).json()
    assert_enqueued(shop.send_note, order_id=kept["order"], count=1)
    assert_not_enqueued(shop.send_note, order_id=refused["order"])
    assert_enqueued(shop.ship, order_id=refused["order"], count=1)
    result = drain(shop.dq)
    assert sorted(result.succeeded) == sorted([kept["job"], kept["job"] + 1, refused["job"]])
    assert [o["shipped"] for o in client.get("/orders").json()] == [True, True]
