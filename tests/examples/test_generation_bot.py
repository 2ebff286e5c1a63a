"""The generation bot (write-up 004) end to end: a real API process and real bot processes on
one SQLite file, real signals, and fake AI providers and a fake chat service on loopback that
record every call and message.

Each test names the part of the write-up it checks. Time runs scaled (``--time-scale``):
at 0.01 (the 429 test) the 5/15-minute deadlines are 3 s / 9 s and the 429 delays 50, 150,
300 ms; the deadline test runs at 0.006; the others at ``SLOW`` (0.05: deadlines 15 s /
45 s, which they must not reach even on a loaded machine, and a 750 ms shutdown grace).
Lead numbers and job ids are durq job ids.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from examples.generation_bot import bot as app
from examples.generation_bot import fakes

import durq
from tests.support.procs import ROOT, wait_for

SLOW = 0.05


class Proc:
    """``python -m examples.generation_bot <verb>`` as a child process, output to a file."""

    def __init__(self, data: Path, url: str, scale: float, *args: str, **env: str) -> None:
        self.out = data / f"{args[0]}-{time.monotonic_ns()}.out"
        self._out = open(self.out, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "examples.generation_bot", "--data-dir", str(data),
             "--fakes-url", url, "--time-scale", str(scale), *args],
            cwd=ROOT, stdout=self._out, stderr=subprocess.STDOUT, env={**os.environ, **env},
        )  # fmt: skip

    def events(self, name: str) -> list[dict[str, Any]]:
        found = [json.loads(x) for x in self.out.read_text().splitlines() if x.startswith("{")]
        return [e for e in found if e.get("event") == name]

    def port(self) -> int:
        wait_for(lambda: self.events("api_listening"), 20)
        return int(self.events("api_listening")[0]["port"])

    def started(self) -> Proc:
        wait_for(lambda: self.events("bot_started"), 20)
        return self

    def terminate(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(20)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._out.close()


@pytest.fixture
def world() -> Iterator[tuple[fakes.World, str]]:
    server, _ = fakes.serve()
    try:
        yield server.world, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for p in started:
        p.stop()


def post(port: int, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def upload(port: int, rid: str, photo: str, chat: str | None = None) -> int:
    status, body = post(port, "/photos", {"request_id": rid, "chat_id": chat or rid,
                                          "photo": photo})  # fmt: skip
    assert status == 200, body
    return int(body["job"])


def jobs(data: Path) -> dict[int, durq.Job]:
    """The generation jobs by id, read with the durq API from the test process."""
    dq = durq.Durq(f"sqlite:///{data / 'durq.db'}", migrate=False)
    try:
        return {j.id: j for j in dq.jobs(queue=app.QUEUE, task="generate", limit=1000)}
    finally:
        dq.close()


def state(data: Path, job_id: int) -> tuple[str, int]:
    job = jobs(data)[job_id]
    return job.state, job.attempts


def command(data: Path, url: str, text: str, **env: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "examples.generation_bot", "--data-dir", str(data),
         "--fakes-url", url, "command", text],
        cwd=ROOT, capture_output=True, text=True, timeout=60, env={**os.environ, **env},
    )  # fmt: skip
    return done.returncode, json.loads(done.stdout.splitlines()[-1])


def test_uploads_while_the_bot_is_down_are_processed_when_it_starts(
    tmp_path: Path, world: tuple[fakes.World, str], procs: list[Proc]
) -> None:
    """'Outbox pattern' (generation jobs and lead cards written by the API process, delivered
    by the bot process; "the API can accept photos and leads while the bot is down") and
    'Landing': a visitor retry with the same requestId gets the same lead number."""
    w, url = world
    procs.append(api := Proc(tmp_path, url, SLOW, "api", "--port", "0"))
    port = api.port()
    ids = [upload(port, f"guest{i}", f"p{i}") for i in (1, 2)]
    assert upload(port, "guest1", "p1") == ids[0]  # a retried upload: the same job
    first = post(port, "/leads", {"requestId": "L-1", "name": "Ann", "contact": "@ann"})
    again = post(port, "/leads", {"requestId": "L-1", "name": "Ann", "contact": "@ann"})
    other = post(port, "/leads", {"requestId": "L-2", "name": "Bob", "contact": "@bob"})
    assert first == again and first[0] == 200 and other[1]["lead"] != first[1]["lead"]
    time.sleep(0.5)
    assert w.calls == [] and w.sent_to("leads") == []  # nobody delivers yet: the bot is down
    assert w.sent_to("guest1") == ["Generating..."]
    procs.append(Proc(tmp_path, url, SLOW, "bot").started())
    wait_for(lambda: all(j.state == "succeeded" for j in jobs(tmp_path).values()), 20)
    wait_for(lambda: len(w.sent_to("leads")) == 2 and len(w.sent_to("guest1")) == 2 and
             len(w.sent_to("guest2")) == 2, 10)  # fmt: skip
    assert w.sent_to("guest1")[1] == "Your sticker pack is ready: https://t.me/addstickers/pack_p1"
    lead = first[1]["lead"]
    assert sorted(w.sent_to("leads")) == sorted(
        [f"Lead #{lead}: Ann, @ann", f"Lead #{other[1]['lead']}: Bob, @bob"]
    )
    assert len(w.calls) == 2  # one provider call per photo, the duplicate added nothing


def test_provider_delay_table() -> None:
    """'Retry and backoff tables', "Provider call on 429": 5 s, 15 s, 30 s, or the provider's
    hint up to 60 s, plus up to 20 % jitter."""
    for retry, base in enumerate(app.PROVIDER_DELAYS):
        delays = [app.provider_delay(retry, None) for _ in range(200)]
        assert base <= min(delays) and max(delays) <= base * 1.2
    assert 40 <= app.provider_delay(0, 40.0) <= 48
    assert 60 <= app.provider_delay(1, 600.0) <= 72
    assert app.provider_delay(2, None, scale=0.01) <= 0.36


def test_429s_are_retried_after_the_table_delays_then_the_fallback_serves(
    tmp_path: Path, world: tuple[fakes.World, str], procs: list[Proc]
) -> None:
    """'Retry and backoff tables': "Provider call on 429 | 3 retries | 5 s, 15 s, 30 s (or the
    provider's hint, up to 60 s) | Next provider in the chain"; "daily-quota 429 | 0 | Next
    provider at once"; and a chain with no pack is a job retry ("Job | 2 | 10 s")."""
    w, url = world
    scale = 0.01
    w.set_provider("primary", "429", ["429", "429:40", "429:600"])  # tier 5 s, hint 40, 600→60
    procs.append(api := Proc(tmp_path, url, scale, "api", "--port", "0"))
    port = api.port()
    limited = upload(port, "ann", "p-ann")
    procs.append(Proc(tmp_path, url, scale, "bot").started())
    wait_for(lambda: state(tmp_path, limited)[0] == "succeeded", 20)
    calls = w.calls_for("p-ann")
    assert [(c["provider"], c["answer"]) for c in calls] == [
        ("primary", "429"), ("primary", "429:40"), ("primary", "429:600"), ("primary", "429"),
        ("fallback", "ok"),
    ]  # fmt: skip
    gaps = [b["at"] - a["at"] for a, b in itertools.pairwise(calls)]
    for gap, wanted in zip(gaps, (5.0, 40.0, 60.0), strict=False):
        assert wanted * scale * 0.95 <= gap, (gaps, wanted)
    assert state(tmp_path, limited) == ("succeeded", 1)
    assert jobs(tmp_path)[limited].result["provider"] == "fallback"

    # A daily quota: no waiting, the fallback at once; both failing: the job is retried.
    w.set_provider("primary", "daily")
    w.set_provider("fallback", "ok", ["500"])
    flaky = upload(port, "bob", "p-bob")
    wait_for(lambda: state(tmp_path, flaky)[0] == "succeeded", 20)
    calls = w.calls_for("p-bob")
    assert [(c["provider"], c["answer"]) for c in calls] == [
        ("primary", "daily"), ("fallback", "500"), ("primary", "daily"), ("fallback", "ok"),
    ]  # fmt: skip
    assert calls[2]["at"] - calls[1]["at"] >= app.JOB_RETRY_DELAY * scale * 0.95
    assert state(tmp_path, flaky) == ("succeeded", 2)


def test_402_everywhere_pauses_alerts_once_and_only_resume_of_auto_clears_it(
    tmp_path: Path, world: tuple[fakes.World, str], procs: list[Proc]
) -> None:
    """'Auto-pause on 402' (fail without retry, maintenance row with source auto, ONE admin
    alert with cooldown key billing_exhausted, the guest told) and 'Maintenance mode
    sources' (uploads answer 503 maintenance; /resume clears auto; env cannot be cleared by
    /resume; the leads group is unaffected)."""
    w, url = world
    w.set_provider("primary", "402")
    w.set_provider("fallback", "402")
    procs.append(api := Proc(tmp_path, url, SLOW, "api", "--port", "0"))
    port = api.port()
    ids = [upload(port, f"g{i}", f"slow300-p{i}") for i in range(2)]
    procs.append(bot := Proc(tmp_path, url, SLOW, "bot").started())
    wait_for(lambda: all(j.state == "failed" for j in jobs(tmp_path).values()), 20)
    for job_id in ids:
        job = jobs(tmp_path)[job_id]
        assert job.attempts == 1 and job.last_error is not None
        assert job.last_error.type.endswith(".BillingExhausted")  # durq.Permanent: no retry
    wait_for(lambda: all(w.sent_to(f"g{i}")[1:] == [app.TEXTS["unavailable"]] for i in (0, 1)), 10)
    alerts = w.sent_to("admin")
    assert len(alerts) == 1 and "billing_exhausted" in alerts[0], alerts
    assert post(port, "/photos", {"request_id": "g9", "chat_id": "g9", "photo": "p9"}) == (
        503, {"code": "maintenance", "source": "auto"})  # fmt: skip
    lead = post(port, "/leads", {"requestId": "L", "name": "Cy", "contact": "@cy"})[1]["lead"]
    wait_for(lambda: w.sent_to("leads") == [f"Lead #{lead}: Cy, @cy"], 10)

    # The account is topped up; an admin sends /resume: uploads and generation work again.
    w.set_provider("primary", "ok")
    assert command(tmp_path, url, "/resume")[1]["maintenance"] is None
    assert command(tmp_path, url, "/resume")[0] == 1  # nothing left to resume
    ok = upload(port, "g3", "p3")
    wait_for(lambda: state(tmp_path, ok)[0] == "succeeded", 10)
    assert bot.terminate() == 0

    # MAINTENANCE_MODE=1 at bot start: an env pause that /resume cannot clear.
    procs.append(bot := Proc(tmp_path, url, SLOW, "bot", MAINTENANCE_MODE="1").started())
    assert bot.events("bot_started")[0]["maintenance"] == "env"
    code, answer = command(tmp_path, url, "/resume")
    assert code == 1 and answer["maintenance"] == "env" and "restart" in answer["note"]
    assert post(port, "/photos", {"request_id": "g4", "chat_id": "g4", "photo": "p4"})[0] == 503
    assert bot.terminate() == 0
    procs.append(Proc(tmp_path, url, SLOW, "bot", MAINTENANCE_MODE="0").started())
    assert upload(port, "g4", "p4") > ok  # set to 0 and restarted: open again


def test_deadlines_from_created_at_and_an_outage_longer_than_both(
    tmp_path: Path, world: tuple[fakes.World, str], procs: list[Proc]
) -> None:
    """'Deadlines persisted in the database': "still working" at 5 minutes and the failure
    at 15, from created_at, sent once each; "a bot that was down for 20 minutes fails
    overdue jobs on its first sweep and does not send the still working notice to them
    first". At scale 0.006: notice 1.8 s, deadline 5.4 s, the outage 7.2 s."""
    w, url = world
    scale = 0.006
    procs.append(api := Proc(tmp_path, url, scale, "api", "--port", "0"))
    port = api.port()
    overdue = upload(port, "olga", "p-olga")  # uploaded during an outage ...
    time.sleep(app.DEADLINE * scale * 20 / 15)  # ... that lasts "20 minutes"
    procs.append(Proc(tmp_path, url, scale, "bot").started())
    wait_for(lambda: state(tmp_path, overdue)[0] == "expired", 10)
    slow = upload(port, "sam", "slow3600-p-sam")  # done between notice and deadline
    stuck = upload(port, "tim", "slow6400-p-tim")  # still running at the deadline
    wait_for(lambda: state(tmp_path, slow)[0] == "succeeded", 20)
    wait_for(lambda: state(tmp_path, stuck)[0] == "expired", 20)
    wait_for(lambda: len(w.sent_to("tim")) == 3, 10)
    time.sleep(6.4 - app.DEADLINE * scale + 0.5)  # the stuck call returns meanwhile
    assert w.sent_to("olga") == ["Generating...", app.TEXTS["failed"]]  # no notice first
    assert w.calls_for("p-olga") == []  # never started
    assert w.sent_to("sam") == [
        "Generating...", app.TEXTS["slow"],
        "Your sticker pack is ready: https://t.me/addstickers/pack_slow3600-p-sam",
    ]  # fmt: skip
    assert w.sent_to("tim") == ["Generating...", app.TEXTS["slow"], app.TEXTS["failed"]]
    assert len(w.calls_for("slow6400-p-tim")) == 1  # its late pack is not sent
    job = jobs(tmp_path)[stuck]
    assert job.deadline is not None and job.notice_at is not None
    assert job.deadline - job.created_at == pytest.approx(app.DEADLINE * scale)
    assert job.notice_at - job.created_at == pytest.approx(app.NOTICE_AFTER * scale)


def test_sigterm_requeues_running_jobs_the_first_two_times_for_free(
    tmp_path: Path, world: tuple[fakes.World, str], procs: list[Proc]
) -> None:
    """'Graceful shutdown and requeue': SIGTERM -> 15 s grace (750 ms here) -> a job still
    running is requeued, "the first 2 such requeues of a job are free;
    later ones consume an attempt" (MAX_ATTEMPTS 2), so restarts cannot loop a job forever."""
    w, url = world
    procs.append(api := Proc(tmp_path, url, SLOW, "api", "--port", "0"))
    job = upload(api.port(), "uma", "slow20000-p-uma")
    seen = []
    for n in range(1, 5):
        procs.append(bot := Proc(tmp_path, url, SLOW, "bot").started())
        wait_for(lambda n=n: len(w.calls_for("slow20000-p-uma")) == n, 20)
        assert bot.terminate() == 0
        seen.append(state(tmp_path, job))
    assert seen == [("queued", 0), ("queued", 0), ("queued", 1), ("failed", 2)]
    errors = jobs(tmp_path)[job].errors
    assert [e.kind for e in errors] == ["shutdown", "shutdown"]  # the charged ones only
    procs.append(Proc(tmp_path, url, SLOW, "bot").started())  # the next start reports it
    wait_for(lambda: app.TEXTS["failed"] in w.sent_to("uma"), 10)
    assert len(w.calls_for("slow20000-p-uma")) == 4


def test_after_a_sigkill_the_next_start_fails_jobs_at_the_cap_and_requeues_the_rest(
    tmp_path: Path, world: tuple[fakes.World, str], procs: list[Proc]
) -> None:
    """'Graceful shutdown and requeue', after a hard kill: "a processing job whose attempts
    would now reach the cap becomes failed, with an alert and the failure text for the
    guest; other processing jobs return to queued with one attempt consumed"."""
    w, url = world
    procs.append(api := Proc(tmp_path, url, SLOW, "api", "--port", "0"))
    port = api.port()
    fresh = upload(port, "vic", "slow3000-p-vic")  # killed on its first attempt
    second = upload(port, "wes", "fail2-slow3000-p-wes")  # killed on its last attempt
    procs.append(bot := Proc(tmp_path, url, SLOW, "bot", "--lease", "1.5").started())
    wait_for(lambda: len(w.calls_for("fail2-slow3000-p-wes")) == 3, 20)
    wait_for(lambda: len(w.calls_for("slow3000-p-vic")) == 1, 20)
    bot.proc.send_signal(signal.SIGKILL)
    bot.proc.wait(10)
    assert state(tmp_path, fresh) == ("running", 1) and state(tmp_path, second) == ("running", 2)
    time.sleep(1.6)  # the dead bot's leases run out
    procs.append(Proc(tmp_path, url, SLOW, "bot").started())
    wait_for(lambda: state(tmp_path, fresh)[0] == "succeeded", 20)
    assert state(tmp_path, fresh) == ("succeeded", 2)  # one attempt consumed by the kill
    assert state(tmp_path, second) == ("failed", 2)
    assert jobs(tmp_path)[second].last_error.kind == "lease_lost"  # type: ignore[union-attr]
    assert len(w.calls_for("fail2-slow3000-p-wes")) == 3  # not run again
    wait_for(lambda: app.TEXTS["failed"] in w.sent_to("wes"), 10)
    wait_for(lambda: any(f"generation_failed:{second}" in a for a in w.sent_to("admin")), 10)
    assert app.TEXTS["failed"] not in w.sent_to("vic")


def test_a_second_bot_on_the_same_data_exits_with_code_1(
    tmp_path: Path, world: tuple[fakes.World, str], procs: list[Proc]
) -> None:
    """'Single-instance lock': a second bot on the same data logs that its start was
    cancelled and exits with code 1; the lock goes with the process that held it."""
    _, url = world
    procs.append(first := Proc(tmp_path, url, SLOW, "bot").started())
    procs.append(second := Proc(tmp_path, url, SLOW, "bot"))
    assert second.proc.wait(20) == 1
    assert "start cancelled: another bot process holds" in second.out.read_text()
    assert first.proc.poll() is None
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(10)
    procs.append(Proc(tmp_path, url, SLOW, "bot").started())  # the OS released the lock
