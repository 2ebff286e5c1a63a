"""Periodic jobs (issue 4 item 5; cases 07 and 08), on every backend.

The scheduler's :func:`tick` is driven directly under the injected clock: each test moves
time by hand and counts the jobs in the database.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

import durq
from durq.periodic import key_for
from durq.worker.scheduler import Fired, tick
from tests.conftest import Clock

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def at(clock: Clock, when: datetime) -> None:
    clock.now = when.timestamp()


def register(app: durq.Durq, cron: str = "* * * * *", **options: object) -> durq.Task:
    @app.periodic(cron, **options)  # type: ignore[arg-type]
    @app.task(queue="cron")
    def beat(slot: int = 0) -> int:
        return slot

    return beat


def slots(app: durq.Durq, task: str = "beat") -> list[float]:
    """run_at of every job of ``task``, in order (a slot's job runs at the slot)."""
    return sorted(j.run_at for j in app.jobs(task=task, limit=100_000))


def run_for(app: durq.Durq, clock: Clock, seconds: float, step: float) -> None:
    """Tick every ``step`` seconds of injected time for ``seconds``."""
    end = clock.now + seconds
    while clock.now < end:
        clock.advance(step)
        tick(app)


def utc(*args: int) -> float:
    return datetime(*args, tzinfo=UTC).timestamp()  # type: ignore[misc]


# -- one slot, one job ----------------------------------------------------------------------


def test_each_slot_is_enqueued_once_with_its_key_and_run_at(app: durq.Durq, clock: Clock) -> None:
    register(app, slot_arg="slot")
    at(clock, datetime(2026, 5, 4, 12, 0, 50, tzinfo=UTC))
    assert tick(app) == []  # first sight: anchored now, no slot before it
    clock.advance(10)  # 12:01:00
    (fired,) = tick(app)
    assert tick(app) == [] and tick(app) == []
    job = app.get(fired.job_id)
    minute = utc(2026, 5, 4, 12, 1)
    assert (fired.slot, job.run_at, job.queue) == (minute, minute, "cron")
    assert job.key == key_for("beat", minute) == f"periodic:beat:{int(minute)}"
    assert job.payload == {"slot": int(minute)}
    assert job.meta == {"periodic": "beat", "slot": int(minute)}
    assert app.store.periodic_slots() == {"beat": (minute, fired.job_id)}
    run_for(app, clock, 180, 7)
    assert slots(app) == [minute + 60 * i for i in range(4)]


def test_plain_function_form_registers_the_task(app: durq.Durq, clock: Clock) -> None:
    @app.periodic("*/5 * * * *", queue="reports", payload={"kind": "daily"}, max_attempts=7)
    def report(kind: str) -> str:
        return kind

    assert isinstance(report, durq.Task) and app.tasks["report"] is report
    at(clock, datetime(2026, 5, 4, 12, 4, 30, tzinfo=UTC))
    tick(app)
    clock.advance(31)
    (fired,) = tick(app)
    job = app.get(fired.job_id)
    assert (job.queue, job.task, job.payload, job.max_attempts) == (
        "reports",
        "report",
        {"kind": "daily"},
        7,
    )


def test_bad_schedules_are_refused_at_registration(app: durq.Durq) -> None:
    @app.task
    def needs(x: int) -> int:
        return x

    with pytest.raises(durq.ConfigError, match="cron"):
        app.periodic("61 * * * *")(needs)
    with pytest.raises(durq.ConfigError, match="time zone"):
        app.periodic("* * * * *", tz="Mars/Olympus", payload={"x": 1})(needs)
    with pytest.raises(durq.ConfigError, match="catch_up"):
        app.periodic("* * * * *", catch_up=-1, payload={"x": 1})(needs)
    with pytest.raises(durq.PayloadError, match="does not fit"):
        app.periodic("* * * * *")(needs)  # x missing
    with pytest.raises(durq.PayloadError):
        app.periodic("* * * * *", payload={"x": object()})(needs)
    app.periodic("* * * * *", payload={"x": 1})(needs)
    app.periodic("* * * * *", payload={"x": 1})(needs)  # the same again (a re-import): fine
    with pytest.raises(durq.ConfigError, match="already exists"):
        app.periodic("*/2 * * * *", payload={"x": 1})(needs)
    app.periodic("*/2 * * * *", name="needs-2", payload={"x": 2})(needs)
    assert sorted(app.periodics) == ["needs", "needs-2"]


# -- case 07: restarts and two schedulers -----------------------------------------------------


def test_case07_restart_inside_a_slot_does_not_fire_it_again(
    make: Callable[[], durq.Durq], clock: Clock
) -> None:
    """Start at mm:50, fire at (m+1):00, die at (m+1):02, restart at (m+1):04, run until
    (m+3):10: one job per minute, three in all."""
    first = make()
    register(first)
    at(clock, datetime(2026, 5, 4, 12, 0, 50, tzinfo=UTC))
    tick(first)
    clock.advance(10)
    assert len(tick(first)) == 1  # (m+1):00
    clock.advance(2)
    first.close()  # the scheduler dies (nothing in memory survives)
    clock.advance(2)
    second = make()
    register(second)
    assert tick(second) == []  # (m+1):04, inside the slot it already fired
    run_for(second, clock, 126, 3)  # to (m+3):10
    m1 = utc(2026, 5, 4, 12, 1)
    assert slots(second) == [m1, m1 + 60, m1 + 120]


def test_case07_two_schedulers_at_once_fire_each_slot_once(
    make: Callable[[], durq.Durq], clock: Clock
) -> None:
    """Four schedulers (own connections each) tick at the same instants for 3 minutes."""
    apps = [make() for _ in range(4)]
    for a in apps:
        register(a)
    at(clock, datetime(2026, 5, 4, 12, 0, 50, tzinfo=UTC))
    fired: list[float] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def one(a: durq.Durq, gate: threading.Barrier) -> None:
        try:
            gate.wait(10)
            got = tick(a)
            with lock:
                fired.extend(f.slot for f in got)
        except BaseException as exc:
            errors.append(exc)

    for _ in range(37):  # 12:00:50 .. 12:03:55 in 5 s steps
        gate = threading.Barrier(len(apps))
        threads = [threading.Thread(target=one, args=(a, gate)) for a in apps]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        clock.advance(5)
    assert not errors, errors
    m1 = utc(2026, 5, 4, 12, 1)
    assert sorted(fired) == [m1, m1 + 60, m1 + 120]  # each reported by exactly one winner
    assert slots(apps[0]) == [m1, m1 + 60, m1 + 120]


def test_a_frozen_scheduler_that_resumes_cannot_go_back(app: durq.Durq, clock: Clock) -> None:
    """A scheduler that computed a slot, froze, and resumes after a stand-in enqueued it
    and later slots: its enqueue is refused (None) and writes nothing."""
    register(app)
    at(clock, datetime(2026, 5, 4, 12, 0, 50, tzinfo=UTC))
    tick(app)
    clock.advance(10)
    m1 = utc(2026, 5, 4, 12, 1)
    late = app.periodics["beat"].due(m1 - 60, clock.now)  # what the frozen one computed
    assert late == [m1]
    run_for(app, clock, 120, 10)  # the stand-in enqueues 12:01, 12:02, 12:03
    from durq.worker.scheduler import _enqueue_slot

    for slot in (m1, m1 + 60, m1 + 120):
        assert _enqueue_slot(app, app.periodics["beat"], slot) is None
    assert slots(app) == [m1, m1 + 60, m1 + 120]


def test_deleted_jobs_do_not_make_their_slots_fire_again(app: durq.Durq, clock: Clock) -> None:
    """Retention deletes old jobs and their keys; the stored last slot still holds."""
    register(app)
    at(clock, datetime(2026, 5, 4, 12, 0, 50, tzinfo=UTC))
    tick(app)
    clock.advance(20)
    (fired,) = tick(app)
    assert app.purge("cron", states=["queued"]) == 1
    assert tick(app) == []
    assert app.store.periodic_slots()["beat"][0] == fired.slot
    clock.advance(60)
    assert [f.slot for f in tick(app)] == [fired.slot + 60]


def test_a_job_whose_key_exists_is_not_duplicated(app: durq.Durq, clock: Clock) -> None:
    """If the slot's job exists (enqueued by hand with its key, or the row was reset), the
    slot advances without a second job."""
    beat = register(app)
    at(clock, datetime(2026, 5, 4, 12, 0, 50, tzinfo=UTC))
    tick(app)
    m1 = utc(2026, 5, 4, 12, 1)
    manual = beat.options(key=key_for("beat", m1)).enqueue()
    clock.advance(10)
    (fired,) = tick(app)
    assert (fired.job_id, fired.created) == (manual.id, False)
    assert len(app.jobs(task="beat")) == 1


# -- catch-up after downtime ------------------------------------------------------------------


def test_case07_one_missed_slot_fires_once_after_a_short_outage(
    make: Callable[[], durq.Durq], clock: Clock
) -> None:
    """Stopped at mm:50, restarted at (m+1):30: the missed (m+1):00 fires exactly once."""
    first = make()
    register(first)
    at(clock, datetime(2026, 5, 4, 12, 0, 50, tzinfo=UTC))
    tick(first)
    first.close()
    clock.advance(40)
    second = make()
    register(second)
    assert [f.slot for f in tick(second)] == [utc(2026, 5, 4, 12, 1)]
    assert tick(second) == []


@pytest.mark.parametrize(("catch_up", "expected"), [(0, 0), (1, 1), (3, 3), (100, 12)])
def test_catch_up_enqueues_at_most_the_latest_missed_slots(
    make: Callable[[], durq.Durq], clock: Clock, catch_up: int, expected: int
) -> None:
    """Down from 12:00:30 to 13:01:30 with a 5-minute schedule: 12 slots were missed
    (12:05 .. 13:00, each more than the 60 s grace late); catch_up=N enqueues the latest N."""
    first = make()
    register(first, "*/5 * * * *", catch_up=catch_up)
    at(clock, datetime(2026, 5, 4, 12, 0, 30, tzinfo=UTC))
    tick(first)
    first.close()
    at(clock, datetime(2026, 5, 4, 13, 1, 30, tzinfo=UTC))
    second = make()
    register(second, "*/5 * * * *", catch_up=catch_up)
    tick(second)
    one = utc(2026, 5, 4, 13, 0)
    assert slots(second) == [one - 300 * i for i in range(expected)][::-1]
    assert second.store.periodic_slots()["beat"][0] == (
        one if expected else utc(2026, 5, 4, 12, 0, 30)
    )
    # and then on as usual: 13:05 fires on time whatever catch_up is
    at(clock, datetime(2026, 5, 4, 13, 5, 2, tzinfo=UTC))
    assert [f.slot for f in tick(second)] == [one + 300]


def test_a_long_outage_costs_catch_up_steps_not_every_slot(app: durq.Durq, clock: Clock) -> None:
    """A per-second schedule down for 30 days: the look-back walks backwards from now."""
    register(app, "* * * * * *", catch_up=1)
    at(clock, datetime(2026, 5, 4, 12, 0, 0, tzinfo=UTC))
    tick(app)
    clock.advance(30 * 86400 + 120.5)
    fired = tick(app)
    # the 60 slots within the 60 s grace (on time), and the latest missed one before them
    now = int(clock.now)
    assert [f.slot for f in fired] == [float(s) for s in range(now - 60, now + 1)]


# -- case 08 and daylight saving --------------------------------------------------------------


def sweep(app: durq.Durq, clock: Clock, start: datetime, end: datetime, step: float) -> list[Fired]:
    """Tick every ``step`` s from ``start`` to ``end``; what fired for slots in that window
    (a jump of the clock to ``start`` also catches up one slot from before it)."""
    at(clock, start)
    fired = tick(app)
    while clock.now < end.timestamp():
        clock.advance(step)
        fired.extend(tick(app))
    return [f for f in fired if start.timestamp() <= f.slot]


def local_days(fired: list[float], tz: ZoneInfo) -> Counter[str]:
    return Counter(datetime.fromtimestamp(s, tz).date().isoformat() for s in fired)


def by_name(fired: list[Fired]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for f in fired:
        out.setdefault(f.name, []).append(f.slot)
    return {k: sorted(v) for k, v in out.items()}


def test_berlin_daily_0230_across_both_dst_changes(app: durq.Durq, clock: Clock) -> None:
    """Spring forward (2026-03-29, 02:00 -> 03:00): 02:30 does not exist; durq fires once,
    at 03:00 CEST (croniter's choice, kept). Fall back (2026-10-25, 03:00 -> 02:00): 02:30
    happens twice; durq fires once, at the first (02:30 CEST)."""
    register(app, "30 2 * * *", tz="Europe/Berlin", grace=3600)
    spring = sweep(
        app,
        clock,
        datetime(2026, 3, 27, 12, tzinfo=BERLIN),
        datetime(2026, 3, 31, 12, tzinfo=BERLIN),
        600,
    )
    assert [f.slot for f in spring] == [
        utc(2026, 3, 28, 1, 30),  # 02:30 CET
        utc(2026, 3, 29, 1, 0),  # 03:00 CEST: 02:30 did not exist
        utc(2026, 3, 30, 0, 30),  # 02:30 CEST
        utc(2026, 3, 31, 0, 30),
    ]
    fall = sweep(
        app,
        clock,
        datetime(2026, 10, 23, 12, tzinfo=BERLIN),
        datetime(2026, 10, 27, 12, tzinfo=BERLIN),
        600,
    )
    assert [f.slot for f in fall] == [
        utc(2026, 10, 24, 0, 30),  # 02:30 CEST
        utc(2026, 10, 25, 0, 30),  # the first 02:30 (CEST); the second (CET) does not fire
        utc(2026, 10, 26, 1, 30),  # 02:30 CET
        utc(2026, 10, 27, 1, 30),
    ]
    every = slots(app)
    assert len(every) == len(set(every))  # and no slot has two jobs


def test_berlin_hourly_fires_once_per_real_hour(app: durq.Durq, clock: Clock) -> None:
    register(app, "0 * * * *", tz="Europe/Berlin", grace=3600)
    spring = sweep(
        app,
        clock,
        datetime(2026, 3, 28, 23, 30, tzinfo=BERLIN),
        datetime(2026, 3, 30, 0, 30, tzinfo=BERLIN),
        300,
    )
    assert local_days([f.slot for f in spring], BERLIN)["2026-03-29"] == 23
    fall = sweep(
        app,
        clock,
        datetime(2026, 10, 24, 23, 30, tzinfo=BERLIN),
        datetime(2026, 10, 26, 0, 30, tzinfo=BERLIN),
        300,
    )
    day = [f.slot for f in fall if datetime.fromtimestamp(f.slot, BERLIN).day == 25]
    assert len(day) == 25  # 02:00 CEST and 02:00 CET are two real hours
    assert all(b - a == 3600 for a, b in itertools.pairwise(day))


def test_case08_new_york_spring_forward_and_fall_back(app: durq.Durq, clock: Clock) -> None:
    """Case 08's scenario: daily 12:00, 01:30, 02:30 and hourly in America/New_York."""

    @app.task(queue="cron")
    def job(slot: int) -> int:
        return slot

    for name, cron in (
        ("noon", "0 12 * * *"),
        ("one-thirty", "30 1 * * *"),
        ("two-thirty", "30 2 * * *"),
        ("hourly", "0 * * * *"),
    ):
        app.periodic(cron, tz="America/New_York", name=name, slot_arg="slot", grace=3600)(job)

    # spring forward: 2026-03-08 02:00 EST becomes 03:00 EDT
    got = by_name(
        sweep(
            app,
            clock,
            datetime(2026, 3, 7, 23, 55, tzinfo=NEW_YORK),
            datetime(2026, 3, 9, 23, 59, tzinfo=NEW_YORK),
            600,
        )
    )
    assert got["noon"] == [utc(2026, 3, 8, 16), utc(2026, 3, 9, 16)]  # EDT: not an hour late
    assert got["one-thirty"] == [utc(2026, 3, 8, 6, 30), utc(2026, 3, 9, 5, 30)]
    assert got["two-thirty"] == [utc(2026, 3, 8, 7), utc(2026, 3, 9, 6, 30)]  # 03:00 EDT
    hourly = local_days(got["hourly"], NEW_YORK)
    assert (hourly["2026-03-08"], hourly["2026-03-09"]) == (23, 24)

    # fall back: 2026-11-01 02:00 EDT becomes 01:00 EST
    got = by_name(
        sweep(
            app,
            clock,
            datetime(2026, 10, 31, 23, 55, tzinfo=NEW_YORK),
            datetime(2026, 11, 2, 23, 59, tzinfo=NEW_YORK),
            600,
        )
    )
    assert got["noon"] == [utc(2026, 11, 1, 17), utc(2026, 11, 2, 17)]  # EST from 02:00 on
    assert got["one-thirty"] == [utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]  # the first
    assert got["two-thirty"] == [utc(2026, 11, 1, 7, 30), utc(2026, 11, 2, 7, 30)]
    hourly = local_days(got["hourly"], NEW_YORK)
    assert (hourly["2026-11-01"], hourly["2026-11-02"]) == (25, 24)

    # every job in the database is one slot of one schedule
    keys = [j.key for j in app.jobs(task="job", limit=10_000)]
    assert len(keys) == len(set(keys))


def test_next_slot_matches_the_policy(app: durq.Durq) -> None:
    beat = register(app, "30 2 * * *", tz="Europe/Berlin")
    p = app.periodics[beat.name]
    first = datetime(2026, 10, 25, 2, 30, tzinfo=BERLIN).timestamp()  # fold=0: CEST
    assert p.next_slot(first - 1) == first
    assert p.next_slot(first) == datetime(2026, 10, 26, 2, 30, tzinfo=BERLIN).timestamp()
    assert p.next_slot(first + timedelta(hours=1).total_seconds()) == p.next_slot(first)
