"""The dashboard over HTTP (Starlette's test client on a real database): every page renders
with hostile text escaped (case 28), actions need the token, a POST, the CSRF field and the
same origin; read-only mode shows and accepts none; /metrics, /healthz, /api/status."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from urllib.parse import parse_qs, urlsplit

import pytest

pytest.importorskip("starlette")
pytest.importorskip("jinja2")
from prometheus_client.parser import text_string_to_metric_families

import durq
from durq.dashboard.app import create_app
from tests.support.dashboard_data import JS_URL, XSS, populate
from tests.support.serve import Client, serving

TOKEN = "s3cret-token"
PAGES = ["/", "/jobs", "/failed", "/parked", "/batches", "/schedules", "/limits", "/workers"]


@pytest.fixture
def dq(url: str) -> Iterator[durq.Durq]:
    app = durq.Durq(url)
    yield app
    app.close()


@pytest.fixture
def client() -> Iterator[Callable[..., Client]]:
    """client(dq, token=..., read_only=...): a Client of a dashboard served on loopback."""
    with ExitStack() as stack:

        def make(dq: durq.Durq, **kwargs: object) -> Client:
            base = stack.enter_context(serving(create_app(dq, **kwargs)))  # type: ignore[arg-type]
            return Client(base)

        yield make


def sign_in(c: Client) -> str:
    page = c.get("/")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf, "the page has a CSRF field"
    r = c.post(
        "/login", data={"csrf": csrf.group(1), "token": TOKEN, "next": "/"}, allow_redirects=False
    )
    assert r.status_code == 303, r.text
    return csrf.group(1)


def test_every_page_escapes_hostile_text(dq: durq.Durq, client: Callable[..., Client]) -> None:
    ids = populate(dq)
    c = client(dq, token=TOKEN)
    sign_in(c)
    urls = [*PAGES, *(f"/jobs/{i}" for i in ids.values()), f"/jobs?q={XSS}", f"/jobs?queue={XSS}"]
    for path in urls:
        r = c.get(path)
        assert r.status_code == 200, (path, r.text[:300])
        assert "<img src=x" not in r.text and "<svg onload" not in r.text, path
        assert "script-src 'self'" in r.headers["content-security-policy"]
        assert r.headers["x-content-type-options"] == "nosniff"
        assert 'href="javascript:' not in r.text.lower(), path
    detail = c.get(f"/jobs/{ids['failed']}").text
    assert "&lt;img src=x onerror=alert(1)&gt;" in detail  # shown as text
    assert "Traceback (most recent call last)" in detail  # the full traceback
    assert JS_URL in c.get(f"/jobs/{ids['succeeded']}").text  # a javascript: value is text
    # large payloads are cut on list pages, whole on the job page; hook jobs are marked
    hook = dq.enqueue("durq.hook:send", {}, queue="mail").id
    listing = c.get("/jobs").text
    assert f'href="/jobs/{hook}"' in listing and '<span class="badge">hook</span>' in listing
    assert "internal hook job" in c.get(f"/jobs/{hook}").text
    assert "x" * 200 not in listing and "x" * 4000 in c.get(f"/jobs/{ids['big']}").text
    # hostile path segments and query strings
    assert c.get(f"/jobs/{XSS}").status_code == 404
    bad = c.get("/jobs?state=<script>")
    assert bad.status_code == 400 and "<script>" not in bad.text


def test_actions_need_token_post_csrf_and_same_origin(
    dq: durq.Durq, client: Callable[..., Client]
) -> None:
    ids = populate(dq)
    failed = ids["failed"]
    c = client(dq, token=TOKEN)
    # not signed in: no buttons, and the POST is refused
    assert 'data-verb="retry"' not in c.get("/failed").text
    r = c.post("/actions/retry", data={"id": str(failed)}, allow_redirects=False)
    assert r.status_code == 401 and dq.get(failed).state == "failed"
    assert r.headers["content-type"].startswith("text/plain")
    # GET never changes state
    assert c.get(f"/actions/retry?id={failed}").status_code == 405
    csrf = sign_in(c)
    assert 'data-verb="retry"' in c.get("/failed").text
    # signed in but without the CSRF field, or from another origin: refused
    assert c.post("/actions/retry", data={"id": str(failed)}).status_code == 403
    r = c.post(
        "/actions/retry", data={"id": str(failed), "csrf": csrf},
        headers={"origin": "http://evil.example"},
    )  # fmt: skip
    assert r.status_code == 403 and dq.get(failed).state == "failed"
    # wrong token at sign-in
    other = client(dq, token=TOKEN)
    page = other.get("/")
    field = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert field
    refused = other.post("/login", data={"csrf": field.group(1), "token": "nope"})
    assert refused.status_code == 403
    # a page to go on from (the navigation and the sign-in form), not a bare text refusal
    assert refused.headers["content-type"].startswith("text/html")
    assert "wrong token" in refused.text and 'name="token"' in refused.text
    # the real thing: retry, pause, resume, adopt, cancel-parked
    r = c.post(
        "/actions/retry", data={"id": str(failed), "csrf": csrf, "next": "/failed"},
        allow_redirects=False,
    )  # fmt: skip
    assert r.status_code == 303 and r.headers["location"].startswith("/failed?")
    assert dq.get(failed).state == "queued"
    # the flash of an earlier action on the page it was sent from does not pile up
    r = c.post(
        "/actions/pause",
        data={"queue": "mail", "csrf": csrf, "next": "/failed?state=x&flash=old&ok=1"},
        allow_redirects=False,
    )  # fmt: skip
    query = parse_qs(urlsplit(r.headers["location"]).query)
    assert query["state"] == ["x"] and len(query["flash"]) == 1 and query["flash"] != ["old"]
    c.post("/actions/resume", data={"queue": "mail", "csrf": csrf})
    assert 'rel="icon"' in c.get("/").text  # no favicon request that 404s
    c.post("/actions/pause", data={"queue": "mail", "csrf": csrf, "reason": "<b>upgrade</b>"})
    assert dq.paused("mail") is not None
    assert "&lt;b&gt;upgrade&lt;/b&gt;" in c.get("/").text
    c.post("/actions/resume", data={"queue": "mail", "csrf": csrf})
    assert dq.paused("mail") is None
    c.post("/actions/adopt", data={"id": str(ids["parked"]), "csrf": csrf})
    assert dq.get(ids["parked"]).state == "queued"
    # an open redirect is not possible
    r = c.post(
        "/actions/resume", data={"queue": "mail", "csrf": csrf, "next": "//evil.example/"},
        allow_redirects=False,
    )  # fmt: skip
    assert r.headers["location"].startswith("/?")
    # a script may use the Bearer header instead of cookie + CSRF
    bare = client(dq, token=TOKEN)
    r = bare.post(
        "/actions/cancel", data={"id": str(ids["queued"])},
        headers={"authorization": f"Bearer {TOKEN}"}, allow_redirects=False,
    )  # fmt: skip
    assert r.status_code == 303 and dq.get(ids["queued"]).state == "cancelled"


def test_read_only_and_tokenless_dashboards_refuse_actions(
    dq: durq.Durq, client: Callable[..., Client]
) -> None:
    ids = populate(dq)
    ro = client(dq, token=TOKEN, read_only=True)
    for path in ["/", "/failed", "/parked", f"/jobs/{ids['failed']}"]:
        text = ro.get(path).text
        assert "data-verb=" not in text and "read-only" in text
    r = ro.post(
        "/actions/retry", data={"id": str(ids["failed"])},
        headers={"authorization": f"Bearer {TOKEN}"},
    )  # fmt: skip
    assert r.status_code == 403 and dq.get(ids["failed"]).state == "failed"
    none = client(dq)
    r = none.post("/actions/retry", data={"id": str(ids["failed"])})
    assert r.status_code == 403 and "token" in r.text


def test_metrics_health_and_status(dq: durq.Durq, client: Callable[..., Client]) -> None:
    populate(dq)
    c = client(dq)
    r = c.get("/metrics")
    assert r.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(r.text)}
    jobs = {(s.labels["queue"], s.labels["state"]): s.value for s in families["durq_jobs"].samples}
    assert jobs[("mail", "failed")] == 1 and jobs[("mail", "parked")] == 1
    assert jobs[("mail", "scheduled")] == 1 and jobs[("mail", "running")] == 1
    assert families["durq_workers_alive"].samples[0].value == 1
    enq = [s for s in families["durq_jobs_enqueued"].samples if s.name.endswith("_total")]
    assert enq[0].value == 9
    assert c.get("/healthz").json()["ok"] is True
    snap = c.get("/api/status").json()
    assert snap["queues"]["mail"]["counts"]["failed"] == 1
    assert snap["workers"][0]["done"] == 3


def _histograms(text: str, name: str) -> dict[str, dict[str, float]]:
    """{queue: {le or 'count' or 'sum': value}} of one histogram family in ``text`` (a
    gauge histogram's ``_gcount`` and ``_gsum``, families of their own in the text format,
    as ``gcount`` and ``gsum``)."""
    out: dict[str, dict[str, float]] = {}
    for fam in text_string_to_metric_families(text):
        if fam.name not in (name, f"{name}_gcount", f"{name}_gsum"):
            continue
        for s in fam.samples:
            q = out.setdefault(s.labels.get("queue", ""), {})
            if s.name.endswith("_bucket"):
                q[s.labels["le"]] = s.value
            else:
                q[s.name.rsplit("_", 1)[1]] = s.value
    return out


def test_wait_and_run_histograms_move_as_jobs_run(url: str) -> None:
    """The dashboard's recent wait and run histograms (from the database) and a worker's
    own durq_wait_seconds (its --metrics-port registry): a job that waited 0.4 s before a
    worker took it falls in the 0.5 s bucket and not the 0.25 s one, on both."""
    import time

    import requests

    from durq.worker.metrics import serve_metrics
    from tests.support.serve import free_port

    dq = durq.Durq(url)
    try:

        @dq.task
        def quick(n: int = 0) -> int:
            return n

        with serving(create_app(dq)) as base:
            before = _histograms(requests.get(f"{base}/metrics", timeout=10).text,
                                 "durq_recent_wait_seconds")  # fmt: skip
            assert before == {}  # no queue yet
            for i in range(3):
                quick.enqueue(n=i)
            time.sleep(0.4)
            worker = dq.worker(concurrency=1)
            port = free_port()
            server = serve_metrics(worker, port)
            assert server is not None
            try:
                worker.run(install_signals=False, stop_when_idle=True)
                own = _histograms(
                    requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text,
                    "durq_wait_seconds",
                )
            finally:
                server.shutdown()
                server.server_close()
            body = requests.get(f"{base}/metrics", timeout=10).text
        wait = _histograms(body, "durq_recent_wait_seconds")["default"]
        run = _histograms(body, "durq_recent_run_seconds")["default"]
        assert wait["gcount"] == 3 and run["gcount"] == 3 and wait["+Inf"] == 3
        assert wait["0.25"] == 0 and wait["0.5"] + wait["1.0"] >= 1 and wait["gsum"] >= 1.2
        assert run["5.0"] == 3  # no-ops
        [mine] = own.values()
        assert mine["count"] == 3 and mine["0.25"] == 0 and mine["sum"] >= 1.2
    finally:
        dq.close()


def test_retry_and_delete_matching_across_queues(
    dq: durq.Durq, client: Callable[..., Client]
) -> None:
    """The failed set's bulk actions act across every queue unless the filters name one;
    the confirmation names the count; none acts past the count it named or on a job newer
    than the ones it counted; both need the token and the CSRF field."""
    from tests.support.dashboard_data import fail_jobs

    for name in ("boom", "gone", "other"):
        dq.task(name=name)(lambda n=0: n)
    boom = fail_jobs(dq, "a", "boom", 2) + fail_jobs(dq, "b", "boom", 3)
    gone = fail_jobs(dq, "a", "gone", 2) + fail_jobs(dq, "b", "gone", 2)
    other = fail_jobs(dq, "a", "other", 1)
    c = client(dq, token=TOKEN)
    assert 'data-verb="delete-matching"' not in c.get("/failed?task=gone").text
    r = c.post("/actions/delete-matching", data={"task": "gone"}, allow_redirects=False)
    assert r.status_code == 401 and all(dq.get(i).state == "failed" for i in gone)
    csrf = sign_in(c)
    assert c.post("/actions/delete-matching", data={"task": "gone"}).status_code == 403  # no CSRF
    page = c.get("/failed?task=boom").text
    assert "Retry the 5 failed job(s) matching these filters, across all queues?" in page
    assert "5 failed job(s) match, across all queues" in page
    assert (
        "Retry the 2 failed job(s) matching these filters, of queue a?"
        in c.get("/failed?task=boom&queue=a").text
    )
    below = re.search(r'name="before" value="(\d+)"', page)
    assert below and int(below.group(1)) == max(boom) + 1
    # a job that failed after the page was drawn is not touched
    late = fail_jobs(dq, "b", "boom", 1)
    r = c.post(
        "/actions/retry-matching",
        data={"task": "boom", "expected": "5", "before": below.group(1), "csrf": csrf,
              "next": "/failed"},
        allow_redirects=False,
    )  # fmt: skip
    assert (
        r.status_code == 303
        and "5+failed+job%28s%29+across+queues+re-queued" in r.headers["location"]
    )
    assert all(dq.get(i).state == "queued" for i in boom) and dq.get(late[0]).state == "failed"
    # delete: at most the count confirmed (3 of the 4), the newest first
    r = c.post(
        "/actions/delete-matching", data={"task": "gone", "expected": "3", "csrf": csrf},
        allow_redirects=False,
    )  # fmt: skip
    assert "3+failed+job%28s%29+across+queues+deleted" in r.headers["location"]
    assert [dq.store.get(i) is None for i in gone] == [False, True, True, True]
    assert dq.get(other[0]).state == "failed"
    assert "no failed job matches" in c.get("/failed?task=boom&queue=a").text
