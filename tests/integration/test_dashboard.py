"""The dashboard over HTTP (Starlette's test client on a real database): every page renders
with hostile text escaped (case 28), actions need the token, a POST, the CSRF field and the
same origin; read-only mode shows and accepts none; /metrics, /healthz, /api/status."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

pytest.importorskip("starlette")
pytest.importorskip("jinja2")
from prometheus_client.parser import text_string_to_metric_families

import durq
from durq.dashboard.app import create_app
from durq.model import AttemptError, Outcome
from tests.support.dashboard_data import JS_URL, XSS, fail_now, populate
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
    # a task named like a script, hostile tags, a child waiting for it, one it cancelled
    dq.task(name=XSS, queue="mail")(lambda: 1)
    ids["hostile_parent"] = dq.enqueue(XSS, {}, tags=[XSS, JS_URL]).id
    ids["waiting"] = dq.enqueue("send", {}, after=[ids["hostile_parent"]], tags=[XSS]).id
    failing = dq.enqueue(XSS, {}).id
    ids["cancelled_by_parent"] = dq.enqueue("send", {}, after=[failing]).id
    fail_now(dq, failing, XSS)
    c = client(dq, token=TOKEN)
    sign_in(c)
    urls = [*PAGES, *(f"/jobs/{i}" for i in ids.values()), f"/jobs?q={XSS}", f"/jobs?queue={XSS}"]
    urls += [f"/jobs?tag={XSS}", f"/failed?tag={XSS}"]
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
    escaped = "&lt;img src=x onerror=alert(1)&gt;"
    for role in ("hostile_parent", "waiting", "cancelled_by_parent"):  # tags, task names
        assert escaped.replace("/", "/<wbr>") in c.get(f"/jobs/{ids[role]}").text, role
    assert (
        'href="/jobs?tag=javascript%3Aalert%283%29"' in c.get(f"/jobs/{ids['hostile_parent']}").text
    )
    listed = c.get("/jobs", params={"tag": XSS}).text
    found = re.findall(r'<tr data-id="(\d+)"', listed)
    assert found == [str(ids[r]) for r in ("waiting", "hostile_parent")]
    assert 'name="tag" value="&lt;img src=x' in listed
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


def test_every_link_of_the_overview_answers(dq: durq.Durq, client: Callable[..., Client]) -> None:
    """The overview links each state's count to the job list filtered on it; the one for
    ``waiting`` (jobs whose parents have not finished) answered 400 "unknown state"."""
    populate(dq)
    parent = dq.enqueue("send", {}, delay=3600).id
    waiting = dq.enqueue("send", {}, after=[parent]).id
    c = client(dq)
    links = sorted(set(re.findall(r'href="(/[^"]*)"', c.get("/").text)))
    assert "/jobs?queue=mail&amp;state=waiting" in links
    for href in links:
        r = c.get(href.replace("&amp;", "&"))
        assert r.status_code == 200, (href, r.text[:300])
    listed = c.get("/jobs", params={"queue": "mail", "state": "waiting"}).text
    assert re.findall(r'<tr data-id="(\d+)"', listed) == [str(waiting)]


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


def _rows(html: str, table: str) -> list[tuple[str, str, str, str]]:
    """(id, task, state, on_parent_failure) of each row of a job page's table ``table``."""
    body = html.split(f'<table class="deps" id="{table}">', 1)[1].split("</table>", 1)[0]
    return re.findall(
        r'<tr data-id="(\d+)"><td class="id"><a href="/jobs/\1">\1</a></td>'
        r'<td class="task">(.*?)</td><td class="s-(\w+)">\3</td><td>(\w+)</td></tr>',
        body,
    )


def test_job_page_shows_tags_parents_and_children(
    dq: durq.Durq, client: Callable[..., Client]
) -> None:
    """A chain's middle step shows its parent and child (links, task, state coloured by
    class, on_parent_failure), what it still waits for, and its tags as links to the
    filtered list; once the first step fails, the last one says which parent cancelled it."""
    step = dq.task(name="etl.step", queue="etl")(lambda n=0: n)
    tags = ["tenant:acme-corp-production-eu-west-1", "import"]
    first, middle = dq.chain(step.s(n=1), step.s(n=2).options(tags=tags))
    last = step.options(after=[middle], on_parent_failure="run").enqueue(n=3)
    c = client(dq)
    page = c.get(f"/jobs/{middle.id}").text
    assert _rows(page, "parents") == [(str(first.id), "etl.<wbr>step", "queued", "cancel")]
    assert _rows(page, "children") == [(str(last.id), "etl.<wbr>step", "waiting", "run")]
    assert 'data-cause="waiting"' in page
    waits = page.split('id="waits-for"', 1)[1].split("</p>", 1)[0]
    assert "Waits for 1 unfinished parent:" in waits and f'href="/jobs/{first.id}"' in waits
    for tag in tags:
        assert f'href="/jobs?{urlencode({"tag": tag})}"' in page, tag
    listed = c.get("/jobs?tag=import").text
    assert re.findall(r'<tr data-id="(\d+)"', listed) == [str(middle.id)]
    assert c.get(f"/jobs/{first.id}").text.count('<table class="deps"') == 1  # no parents
    fail_now(dq, first.id, "etl.step")
    page = c.get(f"/jobs/{middle.id}").text
    assert dq.get(middle.id).state == "cancelled" and 'id="waits-for"' not in page
    cause = page.split('id="cancelled-by"', 1)[1].split("</p>", 1)[0]
    assert f'its parent job <a href="/jobs/{first.id}">{first.id}</a> (etl.<wbr>step)' in cause
    assert 'ended <span class="s-failed">failed</span>' in cause
    assert _rows(page, "parents") == [(str(first.id), "etl.<wbr>step", "failed", "cancel")]
    # the last step runs whatever its parent did (on_parent_failure="run"): not cancelled
    assert 'id="cancelled-by"' not in c.get(f"/jobs/{last.id}").text


def test_a_wide_fan_in_lists_50_parents_and_counts_the_rest(
    dq: durq.Durq, client: Callable[..., Client]
) -> None:
    """A 300-wide fan-in's callback lists its first 50 parents and counts the other 250 by
    state; it names the first 50 of the parents it still waits for and counts the rest."""
    add = dq.task(name="add", queue="fan")(lambda n=0: n)
    total = dq.task(name="total", queue="fan")(lambda values=(): sum(values))
    *members, callback = dq.group([add.s(n=i) for i in range(300)]).then(total.s())
    claimed = dq.store.claim("fan", ["add"], 120, 30.0, "w-fan")
    dq.store.finish([Outcome(x.id, x.lease_token, "succeeded", result="1") for x in claimed])
    c = client(dq)
    page = c.get(f"/jobs/{callback.id}").text
    rows = _rows(page, "parents")
    assert [int(r[0]) for r in rows] == [m.id for m in members[:50]]
    assert {r[2] for r in rows} == {"succeeded"}
    assert "300 jobs: 120 <span" in page and "the first 50 by id below" in page
    rest = page.split('<tr class="rest">', 1)[1].split("</tr>", 1)[0]
    assert "and 250 more: 70 <span" in rest and "180 <span" in rest
    waits = page.split('id="waits-for"', 1)[1].split("</p>", 1)[0]
    assert "Waits for 180 unfinished parents:" in waits and "and 130 more" in waits
    assert re.findall(r'href="/jobs/(\d+)"', waits) == [str(m.id) for m in members[120:170]]
    assert page.count("<tr data-id=") == 50
    child = c.get(f"/jobs/{members[0].id}").text
    assert _rows(child, "children") == [(str(callback.id), "total", "waiting", "cancel")]


def test_tag_filter_pages_and_the_failed_set_acts_on_it(
    dq: durq.Durq, client: Callable[..., Client]
) -> None:
    """/jobs?tag= keeps the tag in its "older" link; /failed?tag= counts and retries only the
    failed jobs with the tag (the form carries it), across queues."""
    from tests.support.dashboard_data import fail_jobs

    dq.task(name="boom")(lambda n=0: n)
    tagged = [dq.enqueue("boom", {"n": i}, queue="a", tags=["batch:7"]).id for i in range(55)]
    dq.enqueue("boom", {}, queue="a", tags=["batch:8"])
    c = client(dq, token=TOKEN)
    first = c.get("/jobs?tag=batch:7").text
    assert len(re.findall(r'<tr data-id="(\d+)"', first)) == 50
    older = re.search(r'href="/jobs\?([^"]+)" id="next"', first)
    assert older and parse_qs(older.group(1).replace("&amp;", "&"))["tag"] == ["batch:7"]
    second = c.get("/jobs?" + older.group(1).replace("&amp;", "&")).text
    assert [int(i) for i in re.findall(r'<tr data-id="(\d+)"', second)] == tagged[:5][::-1]
    # failed: 2 tagged in queue a (claimed out of the tagged ones), 3 untagged in queue b
    claimed = dq.store.claim("a", ["boom"], 2, 30.0, "w-fail")
    err = AttemptError(1, dq.store.now(), "RuntimeError", "boom", "", "permanent")
    dq.store.finish([Outcome(x.id, x.lease_token, "failed", error=err) for x in claimed])
    assert {x.id for x in claimed} <= set(tagged)
    untagged = fail_jobs(dq, "b", "boom", 3)
    csrf = sign_in(c)
    page = c.get("/failed?tag=batch:7").text
    assert "2 failed job(s) match, across all queues" in page
    assert 'name="tag" value="batch:7"' in page.split('class="bulk"', 1)[1]
    below = re.search(r'name="before" value="(\d+)"', page)
    assert below
    r = c.post(
        "/actions/retry-matching",
        data={"tag": "batch:7", "expected": "2", "before": below.group(1), "csrf": csrf,
              "next": "/failed?tag=batch:7"},
    )  # fmt: skip
    assert r.status_code == 303 and "2+failed+job%28s%29" in r.headers["location"]
    assert all(dq.get(x.id).state == "queued" for x in claimed)
    assert all(dq.get(i).state == "failed" for i in untagged)


def test_job_page_shows_entries_not_kept_and_a_cancelled_child_not_as_attempts(
    dq: durq.Durq, client: Callable[..., Client]
) -> None:
    """Defects items 2 and 3: a long history's dropped entries are one row that says how
    many; a child cancelled by its parent has a row 'cancelled', not 'attempt 0'."""

    @dq.task(max_attempts=100)
    def flaky() -> None:
        raise ValueError("boom")

    @dq.task
    def after() -> None:
        pass

    job = flaky.enqueue()
    child = after.options(after=[job]).enqueue()
    for n in range(1, 31):
        (c,) = dq.store.claim("default", ["flaky"], 1, 30.0, "w1")
        kind = "retry" if n < 30 else "failed"
        error = AttemptError(c.attempt, 0.0, "ValueError", f"boom {n}", "", "transient")
        dq.store.finish([Outcome(c.id, c.lease_token, kind, error=error)])
    c = client(dq)
    page = c.get(f"/jobs/{job.id}").text
    assert page.count('<tr data-attempt="') == 22  # the first, the note, the last 20
    assert '<td class="note tone-info" colspan="7">9 earlier attempts not kept</td>' in page
    assert '<tr data-attempt="2"' not in page and '<tr data-attempt="11"' in page
    page = c.get(f"/jobs/{child.id}").text
    assert '<tr data-attempt=""' in page and '<td class="n">cancelled</td>' in page
    assert f"parent job {job.id} (flaky) ended failed</td>" in page
    assert '<td class="n">0</td>' not in page


def test_job_page_tells_the_runs_of_a_replayed_job_apart(
    dq: durq.Durq, client: Callable[..., Client]
) -> None:
    """Each replay counts attempts from 1 again: the attempts column showed "1" on every
    row after two replays (the CLI's ``jobs show`` already said "run 2, attempt 1")."""

    @dq.task(max_attempts=1)
    def doomed() -> None:
        raise ValueError("no")

    job = doomed.enqueue()
    for replay in range(3):
        (c,) = dq.store.claim("default", ["doomed"], 1, 30.0, "w1")
        error = AttemptError(c.attempt, 0.0, "ValueError", f"no {replay}", "tb", "permanent")
        dq.store.finish([Outcome(c.id, c.lease_token, "failed", error=error)])
        if replay < 2:
            dq.retry(job.id)
    page = client(dq).get(f"/jobs/{job.id}").text
    cells = re.findall(
        r'<tr data-attempt="[^"]*" data-run="(\d+)"[^>]*>\s*<td class="n">([^<]*)</td>', page
    )
    assert cells == [
        ("1", "1"), ("1", "replayed"), ("2", "run 2, attempt 1"), ("2", "replayed"),
        ("3", "run 3, attempt 1"),
    ], cells  # fmt: skip
    headings = re.findall(r"<h3>([^<·]*) ·", page)  # the traceback sections
    assert [h.strip() for h in headings] == ["attempt 1", "run 2, attempt 1", "run 3, attempt 1"]
