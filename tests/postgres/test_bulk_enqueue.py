"""PostgreSQL's bulk enqueue (``enqueue_many`` through ``Store.enqueue_rows``: ids reserved
from the identity sequence, one binary COPY): the reservation's plan, the wake-up sent at
the commit and only then, and a server that refuses a row writing nothing."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import psycopg
import pytest
from psycopg import sql

import durq
from durq.store.postgres.connection import NOTIFY_CHANNEL
from durq.store.postgres.jobs import COPY_FROM, COPY_ROWS
from durq.store.postgres.queries import RESERVE_IDS
from tests.conftest import PG_URL


def schema_of(url: str) -> str:
    return dict(parse_qsl(urlsplit(url).query))["schema"]


def plan_nodes(node: dict[str, Any], relation: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every node of an EXPLAIN (FORMAT JSON) plan with how it hangs off its parent."""
    found = [(relation or node.get("Parent Relationship", ""), node)]
    for child in node.get("Plans", []):
        found += plan_nodes(child, child.get("Parent Relationship", ""))
    return found


@pytest.mark.parametrize("name", ["RESERVE_IDS"])
def test_the_id_reservation_looks_the_sequence_up_once(pg_url: str, name: str) -> None:
    """pg_get_serial_sequence (and its cast to regclass) in an InitPlan, computed once per
    reservation, with nextval per id over its result: called per id, the look-up cost 2.3
    of the 6 µs of server CPU a COPY row took."""
    app = durq.Durq(pg_url)
    _ = app.store  # the schema exists
    app.close()
    text = {"RESERVE_IDS": RESERVE_IDS}[name]
    params = {"at": None, "n": 1000, "channel": "c", "queue": "q"}
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        explain = "EXPLAIN (VERBOSE, FORMAT JSON) " + text.format(s=f'"{schema_of(pg_url)}"')
        (plan,) = conn.execute(explain, params).fetchone()[0]  # type: ignore[index]
    nodes = plan_nodes(plan["Plan"])
    lookups = [
        (relation, node)
        for relation, node in nodes
        if any("pg_get_serial_sequence" in out for out in node.get("Output", []))
    ]
    assert lookups, nodes
    for relation, node in lookups:
        assert relation == "InitPlan", node
        assert node["Node Type"] == "Result", node  # one row, no generate_series under it
    per_id = [node for _, node in nodes if node["Node Type"] == "Function Scan"]
    assert per_id and all("nextval" in " ".join(n["Output"]) for n in per_id), per_id


def test_a_bulk_enqueue_wakes_its_queue_at_the_commit(pg_url: str) -> None:
    app = durq.Durq(pg_url)

    @app.task
    def work(n: int) -> None: ...

    _ = app.store
    with psycopg.connect(PG_URL, autocommit=True) as listener:
        listener.execute(f'LISTEN "{NOTIFY_CHANNEL}_{schema_of(pg_url)}"')
        jobs = work.options(queue="bulk").enqueue_many([{"n": i} for i in range(COPY_FROM * 3)])
        woken = [n.payload for n in listener.notifies(timeout=5.0, stop_after=1)]
    app.close()
    assert woken == ["bulk"]
    assert [j.payload["n"] for j in jobs] == list(range(COPY_FROM * 3))


def test_a_row_the_server_refuses_writes_nothing_and_wakes_nobody(pg_url: str) -> None:
    """The wake-up goes with the id reservation, before the COPY: a row refused in the
    middle of the COPY (a CHECK constraint the test adds) rolls back every row and the
    NOTIFY with them; the next enqueue is whole."""
    app = durq.Durq(pg_url)

    @app.task
    def work(n: int) -> None: ...

    _ = app.store
    schema = schema_of(pg_url)
    bad = COPY_ROWS + 7  # in the second write of the COPY
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        refused = json.dumps({"n": bad}, separators=(",", ":"))
        check = "ALTER TABLE {}.jobs ADD CONSTRAINT no_bad CHECK (payload <> {})"
        conn.execute(sql.SQL(check).format(sql.Identifier(schema), sql.Literal(refused)))
        conn.execute(f'LISTEN "{NOTIFY_CHANNEL}_{schema}"')
        items = [{"n": i} for i in range(COPY_ROWS * 2)]
        assert work.enqueue_many(items[:3])  # the payload is encoded as the CHECK expects
        with pytest.raises(durq.StoreError, match="no_bad"):
            work.enqueue_many(items)
        assert len(app.jobs(limit=5000)) == 3
        woken = [n.payload for n in conn.notifies(timeout=1.0)]
        assert woken == ["default"]  # the three jobs' wake-up only
        jobs = work.enqueue_many(items[:bad] + items[bad + 1 :])
        assert len(app.jobs(limit=5000)) == 3 + len(jobs) == 3 + len(items) - 1
        assert [n.payload for n in conn.notifies(timeout=5.0, stop_after=1)] == ["default"]
    app.close()
