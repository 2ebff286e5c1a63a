"""Operating a worker: both log formats, tracebacks in the log and in `durq jobs show`,
`durq workers`, the 80-column `durq status`, `jobs list`, per-worker /metrics (case 30)
and OpenTelemetry spans linked from enqueue to attempt across processes (case 31)."""

from __future__ import annotations

import json
import logging
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import durq
from tests.support.procs import ROOT, WorkerProc, wait_for
from tests.support.serve import free_port

APP = "tests.apps.operating"


def cli(*args: str, url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durq", *args, "--db", url],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def finished(dq: durq.Durq, *ids: int) -> bool:
    return all(dq.get(i).state in ("succeeded", "failed") for i in ids)


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_log_formats_and_tracebacks(tmp_path: Path, url: str, fmt: str) -> None:
    dq = durq.Durq(url)
    ok = dq.enqueue("ok", {"n": 1}).id
    bad = dq.enqueue("boom", {"why": "disk <full>"}, max_attempts=1).id
    log = tmp_path / "worker.log"
    proc = WorkerProc(APP, url, log, ["--log-format", fmt, "--concurrency", "2"])
    try:
        wait_for(lambda: finished(dq, ok, bad), 30, what="both jobs to finish")
        proc.signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        proc.stop()
    text = log.read_text()
    if fmt == "json":
        lines = [json.loads(line) for line in text.splitlines() if line.strip()]  # all JSON
        failed = next(e for e in lines if e["event"] == "job_failed")
        assert failed["id"] == bad and "ValueError: boom: disk <full>" in failed["error"]
        assert "Traceback (most recent call last)" in failed["traceback"]
        assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$", failed["time"])
        done = next(e for e in lines if e["event"] == "job_succeeded")
        assert done["id"] == ok and done["task"] == "ok" and done["worker_id"]
        assert not [e for e in lines if e["event"] == "job_started"]  # DEBUG only
    else:
        line = next(ln for ln in text.splitlines() if "job_failed" in ln)
        assert re.match(r"\d\d:\d\d:\d\d\.\d{3} ERROR job_failed +#\d+ boom ", line)
        assert "Traceback (most recent call last)" in text and "    ValueError: boom" in text
        assert re.search(rf"INFO  job_succeeded +#{ok} ok \d+\.\d{{3}}s", text)
    # the traceback reaches `durq jobs show`, with why the job is not running
    shown = cli("jobs", "show", str(bad), url=url)
    assert "Traceback (most recent call last)" in shown.stdout
    assert "ValueError: boom: disk <full>" in shown.stdout
    assert "why: it failed for good" in shown.stdout
    as_json = json.loads(cli("jobs", "show", str(bad), "--json", url=url).stdout)
    assert (
        "Traceback" in as_json["errors"][0]["traceback"] and as_json["why"]["cause"] == "finished"
    )


def test_psycopg_pool_records_join_the_json_stream() -> None:
    import io

    from durq.observability import events, logs

    stream = io.StringIO()
    handler = logs.configure("json", logging.INFO, stream)
    try:
        logging.getLogger("psycopg.pool").warning("rolling back returned connection: %s", "x")
        events.emit("job_succeeded", id=1, task="t")
        handler.flush()
    finally:
        for name in ("durq", "psycopg"):
            lg = logging.getLogger(name)
            lg.removeHandler(handler)
            lg.propagate = True
        events.set_sink(None)
        handler.close()
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert lines[0]["event"] == "log" and lines[0]["logger"] == "psycopg.pool"
    assert "rolling back" in lines[0]["message"] and lines[1]["event"] == "job_succeeded"


def test_workers_status_and_jobs_list_on_a_terminal(tmp_path: Path, url: str) -> None:
    dq = durq.Durq(url)
    for i in range(3):
        dq.enqueue("ok", {"n": i}, queue=f"queue-with-a-rather-long-name-{i}")
    done = dq.enqueue("ok", {"n": 9}).id
    bad = dq.enqueue("boom", {"why": "word " * 30}, max_attempts=1).id
    proc = WorkerProc(
        APP, url, tmp_path / "w.log", ["--queues", "default", "-c", "3", "--heartbeat", "0.5"]
    )
    try:
        wait_for(lambda: finished(dq, done, bad), 30, what="jobs to finish")
        wait_for(lambda: bool(json.loads(cli("workers", "--json", url=url).stdout)), 15)
        [w] = json.loads(cli("workers", "--json", url=url).stdout)
        assert w["pid"] == proc.pid and w["pool"] == "threads" and w["concurrency"] == 3
        assert w["queues"] == ["default"] and w["version"] and w["state"] == "idle"
        wait_for(
            lambda: json.loads(cli("workers", "--json", url=url).stdout)[0]["done"] == 1, 20,
            what="the worker to report its done count at a beat",
        )  # fmt: skip
        table = cli("workers", url=url)
        assert proc.pid and str(proc.pid) in table.stdout and "threads" in table.stdout
        status = cli("status", url=url)
        assert status.returncode == 0
        assert all(len(line) <= 80 for line in status.stdout.splitlines()), status.stdout
        assert "ready" in status.stdout and "live workers: 1" in status.stdout
        wide = cli("status", "--wide", url=url)
        assert "in backoff" in wide.stdout
        listing = cli("jobs", "list", url=url)
        assert "ended" in listing.stdout
        tokens = listing.stdout.replace("│", " ").split()
        pieces = [t for t in tokens if "wor" in t]
        assert len(pieces) == 30 and set(pieces) == {"word"}  # whole, and never cut mid-word
        assert "(hook)" not in listing.stdout
        dq.enqueue("durq.hook:ok", {}, queue="nobody-serves-this")
        assert "durq.hook:ok (hook)" in cli("jobs", "list", url=url).stdout
    finally:
        proc.stop()


def test_worker_metrics_port_and_the_dashboard_sum(tmp_path: Path, url: str) -> None:
    pytest.importorskip("prometheus_client")
    import requests
    from prometheus_client.parser import text_string_to_metric_families

    dq = durq.Durq(url)
    port = free_port()
    args = ["--metrics-port", str(port), "-c", "2", "--heartbeat", "0.5"]
    a = WorkerProc(APP, url, tmp_path / "a.log", args)
    b = WorkerProc(APP, url, tmp_path / "b.log", args)
    try:
        ids = [dq.enqueue("ok", {"n": i}).id for i in range(40)]
        ids += [dq.enqueue("boom", {"why": str(i)}, max_attempts=1).id for i in range(5)]
        wait_for(lambda: finished(dq, *ids), 60, what="45 jobs to finish")
        # one worker bound the port; the other said so and ran on
        wait_for(
            lambda: any(e["event"] == "metrics_unavailable" for p in (a, b) for e in p.events()),
            10,
        )
        assert a.proc.poll() is None and b.proc.poll() is None

        def scrape() -> dict[tuple[str, str], float]:
            body = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
            out: dict[tuple[str, str], float] = {}
            for fam in text_string_to_metric_families(body):
                for s in fam.samples:
                    key = (s.name, s.labels.get("outcome", ""))
                    out[key] = out.get(key, 0) + s.value
            return out

        first = scrape()
        # the worker that bound the port may have run none of the jobs (prefetch lets one
        # worker take a short burst): then neither series has a sample yet
        assert first.get(("durq_attempt_seconds_count", ""), 0) == sum(
            v for (n, _o), v in first.items() if n == "durq_attempts_total"
        )
        # each attempt's wait is observed beside its run time
        assert first.get(("durq_wait_seconds_count", ""), 0) == first.get(
            ("durq_attempt_seconds_count", ""), 0
        )
        # the dashboard's /metrics sums every worker from the database
        from durq.dashboard.app import create_app
        from tests.support.serve import serving

        def summed() -> dict[str, float]:
            with serving(create_app(dq)) as base:
                body = requests.get(f"{base}/metrics", timeout=10).text
            totals: dict[str, float] = {}
            for fam in text_string_to_metric_families(body):
                for s in fam.samples:
                    if s.name == "durq_worker_attempts_total":
                        totals[s.labels["outcome"]] = totals.get(s.labels["outcome"], 0) + s.value
            return totals

        seen: list[dict[str, float]] = []
        wait_for(
            lambda: seen.append(summed()) or seen[-1] == {"succeeded": 40, "failed": 5}, 20,
            what=f"beats to report (last: {seen[-1:]})",
        )  # fmt: skip
        dq.enqueue("ok", {"n": 99})
        # .get: the worker that bound the port may have run none of them, nor this one
        wait_for(
            lambda: (
                scrape().get(("durq_attempts_total", "succeeded"), 0)
                >= first.get(("durq_attempts_total", "succeeded"), 0)
            ),
            10,
        )
    finally:
        a.stop()
        b.stop()


@pytest.mark.parametrize("pool", ["threads", "processes"])
def test_trace_links_enqueue_to_attempt_across_processes(
    tmp_path: Path, db_url: str, pool: str
) -> None:
    """Under either pool: with ``--pool processes`` the attempt's span is opened in the
    child that runs the body (so the user's spans nest in it)."""
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from durq.observability import tracing

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    dq = durq.Durq(db_url)
    tracing.enable()
    old = trace._TRACER_PROVIDER  # type: ignore[attr-defined]
    trace._TRACER_PROVIDER = provider  # type: ignore[attr-defined]
    try:
        with tracer.start_as_current_span("web request") as request_span:
            job = dq.enqueue("flaky_traced")
    finally:
        trace._TRACER_PROVIDER = old  # type: ignore[attr-defined]
        tracing.disable()
    trace_id = f"{request_span.get_span_context().trace_id:032x}"
    [send] = [s for s in exporter.get_finished_spans() if s.name.startswith("send ")]
    assert (
        send.parent is not None and send.parent.span_id == request_span.get_span_context().span_id
    )
    assert send.attributes["messaging.message.id"] == str(job.id)
    assert "traceparent" in job.meta[tracing.TRACE_KEY]

    spans_file = tmp_path / "spans.jsonl"
    proc = WorkerProc(
        APP,
        db_url,
        tmp_path / "w.log",
        ["--otel", "--pool", pool],
        env={"SPANS_FILE": str(spans_file)},
    )
    try:
        wait_for(lambda: dq.get(job.id).state == "succeeded", 30, what="the traced job")
        child = dq.jobs(task="ok", limit=5)
        wait_for(lambda: bool(child) and all(j.refresh().state == "succeeded" for j in child), 30)
        proc.signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        proc.stop()
    spans = [json.loads(line) for line in spans_file.read_text().splitlines()]
    process = [
        s
        for s in spans
        if s["name"] == "process default" and s["attributes"]["durq.task"] == "flaky_traced"
    ]
    assert sorted(s["attributes"]["durq.attempt"] for s in process) == [1, 2]
    send_id = f"{send.context.span_id:016x}"
    for s in process:
        assert s["trace_id"] == trace_id and s["parent_id"] == send_id
        assert s["attributes"]["messaging.system"] == "durq"
        assert s["attributes"]["messaging.destination.name"] == "default"
    failed = next(s for s in process if s["attributes"]["durq.attempt"] == 1)
    assert failed["status"] == "StatusCode.ERROR" and "exception" in failed["events"]
    user = [s for s in spans if s["name"] == "user-work"]
    assert {u["parent_id"] for u in user} == {s["span_id"] for s in process}
    # the job it enqueued continues the same trace
    ok_spans = [s for s in spans if s["attributes"].get("durq.task") == "ok"]
    assert ok_spans and all(s["trace_id"] == trace_id for s in ok_spans)
    assert not any("payload" in k for s in spans for k in s["attributes"])
    assert "tracing_without_provider" not in (tmp_path / "w.log").read_text()


def test_otel_without_a_tracer_provider_in_the_worker_says_so(tmp_path: Path, db_url: str) -> None:
    """Found by a new-user pass: `durq worker --otel` in a process with no TracerProvider
    set up exported nothing, without a word (OpenTelemetry's default records nothing)."""
    pytest.importorskip("opentelemetry")
    log = tmp_path / "w.log"
    proc = WorkerProc(APP, db_url, log, ["--otel", "--log-format", "json"])
    try:
        wait_for(lambda: "worker_started" in log.read_text(), 30, what="the worker's start")
        proc.signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        proc.stop()
    lines = [json.loads(x) for x in log.read_text().splitlines() if x.startswith("{")]
    [warned] = [x for x in lines if x["event"] == "tracing_without_provider"]
    assert warned["level"] == "warning" and "TracerProvider" in warned["message"]


def test_durq_dashboard_verb_binds_loopback_and_says_so(tmp_path: Path, db_url: str) -> None:
    pytest.importorskip("uvicorn")
    import os
    import time

    import requests

    durq.Durq(db_url).enqueue("ok", {"n": 1})
    port = free_port()
    env = {**os.environ, "DURQ_DASHBOARD_TOKEN": "t0ken"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "durq", "dashboard", "--db", db_url, "--port", str(port)],
        cwd=ROOT, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                r = requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline and proc.poll() is None, (
                    "dashboard did not start"
                )
                time.sleep(0.1)
        assert r.json()["ok"] is True
        page = requests.get(f"http://127.0.0.1:{port}/", timeout=5)
        assert 'name="token"' in page.text  # a token is set: the sign-in form shows
    finally:
        proc.terminate()
        try:
            _out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            _out, err = proc.communicate()
    assert f"http://127.0.0.1:{port} (loopback only; actions need the token)" in err


def test_durq_dashboard_on_a_port_in_use_says_so_in_one_line(db_url: str) -> None:
    """Found by a new-user pass: it printed "durq dashboard on http://..." and then
    uvicorn's own error, exit 3."""
    pytest.importorskip("uvicorn")
    import socket

    durq.Durq(db_url).enqueue("ok", {"n": 1})
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "-m", "durq", "dashboard", "--db", db_url, "--port", str(port)],
            cwd=ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert out.returncode == 1
    assert out.stderr == (
        f"durq: error: cannot serve the dashboard on 127.0.0.1:{port}: Address already in use\n"
    )


def test_status_watch_redraws_until_interrupted(db_url: str) -> None:
    """``durq status --watch 0.2`` redraws until Ctrl-C, then exits 0. Waits for the third
    redraw (however slow the machine is to start the process), then interrupts."""
    import threading

    durq.Durq(db_url).enqueue("ok", {"n": 1})
    proc = subprocess.Popen(
        [sys.executable, "-m", "durq", "status", "--db", db_url, "--watch", "0.2"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    lines: list[str] = []
    assert proc.stdout is not None
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
    reader.start()
    try:
        wait_for(lambda: sum("queue " in line for line in lines) >= 3, 60, 0.05,
                 "three redraws")  # fmt: skip
        proc.send_signal(signal.SIGINT)
        proc.wait(10)
        reader.join(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        proc.stdout.close()
    assert sum("queue " in line for line in lines) >= 3 and proc.returncode == 0


def test_jobs_show_lists_every_attempt_with_start_end_and_worker(url: str) -> None:
    """``durq jobs show`` (text and --json): each attempt with its start, end, the worker
    that held its lease and its error with the traceback, the succeeded one last."""
    from durq.model import AttemptError, Outcome

    dq = durq.Durq(url)
    try:
        job = dq.enqueue("ok", {"n": 1})
        for worker, kind in (("host-a:1:aaa", "retry"), ("host-b:2:bbb", "succeeded")):
            [c] = dq.store.claim("default", ["ok"], 1, 30.0, worker)
            if kind == "retry":
                tb = 'Traceback (most recent call last):\n  File "t.py", line 1\nOSError: down\n'
                err = AttemptError(1, dq.store.now(), "OSError", "down", tb, "transient")
                dq.store.finish([Outcome(c.id, c.lease_token, "retry", error=err, delay=0)])
            else:
                dq.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="1")])
    finally:
        dq.close()
    text = cli("jobs", "show", str(job.id), url=url).stdout
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("attempt ")]
    assert len(lines) == 2, text
    assert (
        lines[0].startswith("attempt 1: ")
        and "on host-a:1:aaa [transient] OSError: down" in lines[0]
    )
    assert lines[1].startswith("attempt 2: ") and "on host-b:2:bbb [succeeded]" in lines[1]
    assert "OSError: down" in text.split(lines[0], 1)[1]  # the traceback follows its attempt
    shown = json.loads(cli("jobs", "show", str(job.id), "--json", url=url).stdout)
    assert [(a["attempt"], a["worker_id"], a["outcome"]) for a in shown["attempts"]] == [
        (1, "host-a:1:aaa", "transient"),
        (2, "host-b:2:bbb", "succeeded"),
    ]
    assert all(a["started_at"] and a["ended_at"] >= a["started_at"] for a in shown["attempts"])
