"""The dashboard in a real browser: Playwright for Python driving Debian's Chromium.

Outside CI these skip with one line when /usr/bin/chromium is absent; under CI=true they
must run (``.ci/run`` installs the package). A screenshot of each page goes to
``.artefacts/browser/<test>/`` (gitignored).
"""

from __future__ import annotations

import colorsys
import os
import re
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

import durq
from durq.model import AttemptError, Outcome, WorkerInfo
from durq.model.dashboard import LIST_STATES
from tests.conftest import IN_CI
from tests.support import dashboard_data as dd
from tests.support.dashboard_data import IMG, XSS, fail_jobs, fail_now, populate

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
TOKEN = "browser-token"
ROOT = Path(__file__).resolve().parents[2]

if not os.path.exists(CHROMIUM) and not IN_CI:
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)
pytest.importorskip("playwright", reason="pip install 'durq[browser]'")
pytest.importorskip("starlette", reason="pip install 'durq[dashboard]'")

from playwright.sync_api import Browser, Page, sync_playwright  # noqa: E402

from durq.dashboard.app import create_app  # noqa: E402
from tests.support.serve import serving  # noqa: E402


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"CI=true: the browser tests must run, and {CHROMIUM} is missing")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def shots(request: pytest.FixtureRequest) -> Callable[[Page, str], None]:
    folder = ROOT / ".artefacts" / "browser" / re.sub(r"[^\w.-]", "_", request.node.name)
    folder.mkdir(parents=True, exist_ok=True)

    def shot(page: Page, name: str) -> None:
        page.screenshot(path=str(folder / f"{name}.png"), full_page=True)

    return shot


class Session:
    """A browser page on a served dashboard, counting dialogs (script that ran)."""

    def __init__(self, page: Page, base: str) -> None:
        self.page, self.base = page, base
        self.dialogs: list[str] = []
        self.accept = False  # confirmations are dismissed unless a test says otherwise
        page.on(
            "dialog",
            lambda d: (self.dialogs.append(d.message), d.accept() if self.accept else d.dismiss()),
        )

    def go(self, path: str) -> Page:
        self.page.goto(self.base + path)
        return self.page

    def sign_in(self) -> None:
        self.go("/")
        self.page.fill("#login input[name=token]", TOKEN)
        self.page.click("#login button")
        self.page.wait_for_selector("text=sign out")


@pytest.fixture
def open_dashboard(browser: Browser) -> Iterator[Callable[..., Session]]:
    with ExitStack() as stack:

        def make(dq: durq.Durq, viewport: tuple[int, int] = (1400, 900), **kwargs: Any) -> Session:
            base = stack.enter_context(serving(create_app(dq, **kwargs)))
            width, height = viewport
            context = browser.new_context(viewport={"width": width, "height": height})
            stack.callback(context.close)
            return Session(context.new_page(), base)

        yield make


@pytest.fixture
def dq(db_url: str) -> Iterator[durq.Durq]:
    app = durq.Durq(db_url)
    yield app
    app.close()


def test_pages_actions_and_escaping(
    dq: durq.Durq, open_dashboard: Callable[..., Session], shots: Callable[[Page, str], None]
) -> None:
    ids = populate(dq)
    s = open_dashboard(dq, token=TOKEN)
    page = s.go("/")
    row = page.locator("tr[data-queue=mail]")
    for state in ("queued", "scheduled", "running", "succeeded", "failed", "cancelled", "parked"):
        assert row.locator(f"td.s-{state}").inner_text().strip() != "", state
    assert row.locator("td.s-failed").inner_text().strip() == "1"
    assert page.locator("svg.chart").count() >= 1
    # the overview refreshes itself (durq.js, every 5 s): a new job shows without a reload
    queued = row.locator("td.s-queued").inner_text().strip()
    dq.enqueue("send", {"to": "live"})
    page.wait_for_function(
        "q => document.querySelector('tr[data-queue=mail] td.s-queued').innerText.trim() !== q",
        arg=queued,
        timeout=12_000,
    )
    # not signed in: no action buttons; a POST without the token is refused
    assert page.locator("button[data-verb]").count() == 0
    refused = page.request.post(f"{s.base}/actions/retry", form={"id": str(ids["failed"])})
    assert refused.status == 401 and dq.get(ids["failed"]).state == "failed"
    shots(page, "overview")

    s.sign_in()
    page = s.go("/failed")
    page.fill("#filters input[name=queue]", "mail")
    page.click("#filters button")
    page.wait_for_url(re.compile(r"queue=mail"))
    assert page.locator("table.jobs tbody tr[data-id]").count() == 1
    shots(page, "failed")

    # the job page: its traceback and why it is not running; the payload is text
    page = s.go(f"/jobs/{ids['failed']}")
    assert "Traceback (most recent call last)" in page.locator("pre.traceback").inner_text()
    assert page.locator("#why").get_attribute("data-cause") == "finished"
    assert IMG in page.locator("pre.payload").inner_text()
    shots(page, "job-failed")

    # retry it, with a worker running, and see it succeed
    worker = dq.worker(queues=["mail"], concurrency=2, prune_interval=None)
    worker.start()
    try:
        page.click("button[data-verb=retry]")
        page.wait_for_selector("p.flash.ok")
        deadline = time.monotonic() + 15
        while dq.get(ids["failed"]).state != "succeeded" and time.monotonic() < deadline:
            time.sleep(0.05)
        page = s.go(f"/jobs/{ids['failed']}")
        assert page.locator("h1 .s-succeeded").count() == 1
        shots(page, "job-retried")

        # live workers
        page = s.go("/workers")
        assert page.locator(f"tr[data-worker='{worker.id}']").count() == 1
        shots(page, "workers")
    finally:
        worker.stop(5)

    # pause and resume a queue
    page = s.go("/")
    page.locator("tr[data-queue=mail] button[data-verb=pause]").click()
    page.wait_for_selector("tr[data-queue=mail] .paused")
    assert dq.paused("mail") is not None
    shots(page, "paused")
    page.locator("tr[data-queue=mail] button[data-verb=resume]").click()
    page.wait_for_selector("tr[data-queue=mail] button[data-verb=pause]")
    assert dq.paused("mail") is None

    # adopt a parked job
    page = s.go("/parked")
    page.locator(f"tr[data-id='{ids['parked']}'] button[data-verb=adopt]").click()
    page.wait_for_selector("p.flash.ok")
    assert dq.get(ids["parked"]).state in ("queued", "succeeded")
    shots(page, "parked")

    # every page, and hostile URLs: nothing ran
    for path in ["/jobs", "/batches", "/schedules", "/limits", f"/jobs/{ids['hostile']}",
                 f"/jobs?q={XSS}", f"/jobs?queue={XSS}"]:  # fmt: skip
        page = s.go(path)
        assert page.locator("img[src=x]").count() == 0 and page.locator("svg[onload]").count() == 0
    shots(page, "hostile-query")
    page = s.go(f"/jobs/{ids['hostile']}")
    assert IMG in page.locator("pre.payload").inner_text()
    assert s.dialogs == []


def test_read_only_shows_no_buttons(
    dq: durq.Durq, open_dashboard: Callable[..., Session], shots: Callable[[Page, str], None]
) -> None:
    ids = populate(dq)
    s = open_dashboard(dq, token=TOKEN, read_only=True)
    for path in ["/", "/failed", "/parked", f"/jobs/{ids['failed']}"]:
        page = s.go(path)
        assert page.locator("button[data-verb]").count() == 0, path
        assert page.locator("text=read-only").count() == 1
    shots(page, "read-only-job")
    r = page.request.post(
        f"{s.base}/actions/retry", form={"id": str(ids["failed"])},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )  # fmt: skip
    assert r.status == 403 and dq.get(ids["failed"]).state == "failed"


def test_why_not_running_for_each_cause(
    dq: durq.Durq, open_dashboard: Callable[..., Session], shots: Callable[[Page, str], None]
) -> None:
    @dq.task(queue="q")
    def work(n: int = 0) -> int:
        return n

    @dq.task(queue="q", concurrency=1, concurrency_key="bank")
    def pay(n: int = 0) -> int:
        return n

    @dq.task(queue="q", rate_limit="1/m")
    def ping(n: int = 0) -> int:
        return n

    @dq.task(queue="p")
    def later(n: int = 0) -> int:
        return n

    @dq.task(queue="q")
    def flaky(n: int = 0) -> int:
        return n

    store = dq.store
    cases: dict[str, int] = {}
    cases["stranded"] = dq.enqueue("work", {"n": 0}).id
    now = store.now()
    info = WorkerInfo(
        "w-1",
        socket.gethostname(),
        1,
        ("q", "p"),
        ("flaky", "later", "pay", "ping"),
        now,
        now,
        30.0,
    )
    store.register_worker(info)
    cases["scheduled"] = dq.enqueue("pay", {"n": 0}, delay=900).id
    first = dq.enqueue("pay", {"n": 1}).id
    cases["concurrency_limit"] = dq.enqueue("pay", {"n": 2}).id
    [held] = store.claim("q", ["pay"], 1, 30.0, "w-1")
    assert held.id == first
    cases["running"] = first
    dq.enqueue("ping", {"n": 1})
    cases["rate_limit"] = dq.enqueue("ping", {"n": 2}).id
    store.claim("q", ["ping"], 5, 30.0, "w-1")
    cases["backoff"] = dq.enqueue("flaky", {"n": 1}).id
    [c] = store.claim("q", ["flaky"], 1, 30.0, "w-1")
    err = AttemptError(1, now, "ConnectionError", "refused", "Traceback...\n", "transient")
    store.finish([Outcome(c.id, c.lease_token, "retry", error=err, delay=300)])
    cases["paused"] = dq.enqueue("later", {"n": 2}).id
    dq.pause("p", "deploy")
    cases["parked"] = dq.enqueue("work", {"n": 5}, park=True).id
    s = open_dashboard(dq)
    for cause, job_id in cases.items():
        page = s.go(f"/jobs/{job_id}")
        why = page.locator("#why")
        assert why.get_attribute("data-cause") == cause, (cause, why.inner_text())
        shots(page, f"why-{cause}")
    assert "bank" in s.go(f"/jobs/{cases['concurrency_limit']}").locator("#why").inner_text()
    assert str(first) in s.page.locator("#why").inner_text()
    store.unregister_worker("w-1")
    assert s.go(f"/jobs/{first}").locator("#why").get_attribute("data-cause") == "lease_orphaned"


def test_failed_set_bulk_actions_across_queues(
    dq: durq.Durq, open_dashboard: Callable[..., Session], shots: Callable[[Page, str], None]
) -> None:
    """Retry-all-matching and delete-matching over two queues from the failed set: the
    confirmation names the count and says "across all queues"; dismissing it does nothing;
    accepting it acts on exactly those jobs; without the token there is no button and the
    POST is refused."""
    for name in ("boom", "gone", "other"):
        dq.task(name=name)(lambda n=0: n)
    boom = fail_jobs(dq, "a", "boom", 2) + fail_jobs(dq, "b", "boom", 3)
    gone = fail_jobs(dq, "a", "gone", 1) + fail_jobs(dq, "b", "gone", 2)
    other = fail_jobs(dq, "b", "other", 1)
    s = open_dashboard(dq, token=TOKEN)
    page = s.go("/failed?task=gone")
    assert page.locator("button[data-verb]").count() == 0
    refused = page.request.post(f"{s.base}/actions/delete-matching", form={"task": "gone"})
    assert refused.status == 401 and all(dq.get(i).state == "failed" for i in gone)

    s.sign_in()
    page = s.go("/failed")
    page.fill("#filters input[name=task]", "boom")
    page.click("#filters button")
    page.wait_for_url(re.compile(r"task=boom"))
    assert page.locator("table.jobs tbody tr[data-id]").count() == 5
    assert "5 failed job(s) match, across all queues" in page.locator("div.bulk").inner_text()
    shots(page, "failed-boom-across-queues")
    page.click("button[data-verb=retry-matching]")  # dismissed: nothing happens
    assert s.dialogs[-1] == "Retry the 5 failed job(s) matching these filters, across all queues?"
    assert all(dq.get(i).state == "failed" for i in boom)
    s.accept = True
    page.click("button[data-verb=retry-matching]")
    page.wait_for_selector("p.flash.ok")
    assert "5 failed job(s) across queues re-queued" in page.locator("p.flash").inner_text()
    assert all(dq.get(i).state == "queued" for i in boom)
    shots(page, "failed-boom-retried")

    page = s.go("/failed?task=gone")
    page.click("button[data-verb=delete-matching]")
    page.wait_for_selector("p.flash.ok")
    assert s.dialogs[-1] == (
        "Delete the 3 failed job(s) matching these filters, across all queues, for good?"
    )
    assert "3 failed job(s) across queues deleted" in page.locator("p.flash").inner_text()
    assert all(dq.store.get(i) is None for i in gone)
    assert dq.get(other[0]).state == "failed"
    assert "no failed job matches" in page.locator("div.bulk").inner_text()
    shots(page, "failed-gone-deleted")


def test_job_page_shows_every_attempt(
    dq: durq.Durq, open_dashboard: Callable[..., Session], shots: Callable[[Page, str], None]
) -> None:
    """A job that failed on one worker, lost its lease on a second and succeeded on a
    third: its page has a row per attempt with start, end, worker and outcome, and the
    first attempt's traceback."""

    @dq.task(queue="q")
    def work(n: int = 0) -> int:
        return n

    store = dq.store
    job = dq.enqueue("work", {"n": 1}).id
    [c] = store.claim("q", ["work"], 1, 30.0, "w-first")
    tb = 'Traceback (most recent call last):\n  File "w.py", line 3\nTimeoutError: slow db\n'
    err = AttemptError(1, store.now(), "TimeoutError", "slow db", tb, "transient")
    store.finish([Outcome(c.id, c.lease_token, "retry", error=err, delay=0)])
    store.claim("q", ["work"], 1, 0.05, "w-second")  # a lease it will not extend
    time.sleep(0.2)
    store.reap()
    [c] = store.claim("q", ["work"], 1, 30.0, "w-third")
    store.finish([Outcome(c.id, c.lease_token, "succeeded", result="1")])
    s = open_dashboard(dq)
    page = s.go(f"/jobs/{job}")
    rows = page.locator("table.attempts tbody tr")
    assert rows.count() == 3
    cells = [[td.inner_text().strip() for td in rows.nth(i).locator("td").all()] for i in range(3)]
    assert [(r[0], r[4], r[5]) for r in cells] == [
        ("1", "w-first", "transient"),
        ("2", "w-second", "lease_lost"),
        ("3", "w-third", "succeeded"),
    ]
    assert all(r[1] != "-" and r[2] != "-" and r[3].endswith("s") for r in cells)
    assert "TimeoutError: slow db" in cells[0][6] and "w-second" in cells[1][6]
    assert "TimeoutError: slow db" in page.locator("section.attempt pre.traceback").inner_text()
    shots(page, "job-attempts")


#: A queue name with no place to break it, and one of hyphenated words (issue ux-polish).
LONG_QUEUE = "tenant_" + "x" * 120
WORDY_QUEUE = "notifications-transactional-emails-eu-west-1-priority-high-volume"
LONG_TASK = "send_transactional_email_with_attachments_and_tracking_pixels_" * 3


def _rgb(page: Page, selector: str) -> tuple[int, int, int]:
    """The computed text colour of the first element ``selector`` matches."""
    text = page.locator(selector).first.evaluate("el => getComputedStyle(el).color")
    r, g, b = (int(v) for v in re.findall(r"\d+", text)[:3])
    return r, g, b


def _reddish(rgb: tuple[int, int, int]) -> bool:
    """A saturated colour within 20 degrees of pure red (amber, at about 33, is not)."""
    hue, _, saturation = colorsys.rgb_to_hls(*(v / 255 for v in rgb))
    return saturation > 0.4 and min(hue, 1 - hue) * 360 < 20


def test_overview_fits_a_laptop_screen(
    dq: durq.Durq, open_dashboard: Callable[..., Session], shots: Callable[[Page, str], None]
) -> None:
    """At 1280x800 the overview has no horizontal scroll, with long queue and task names and
    a long pause reason, signed in too (its buttons); each long name is whole in its link's
    title."""
    populate(dq)
    dq.task(name=LONG_TASK, queue=LONG_QUEUE)(lambda n=0: n)
    dq.enqueue(LONG_TASK, {"n": 1})
    dq.enqueue(LONG_TASK, {"n": 2}, queue=WORDY_QUEUE)
    dq.pause(WORDY_QUEUE, "the provider said we are out of credit until the next billing "
             "period starts on the first of the month", source="auto")  # fmt: skip
    s = open_dashboard(dq, token=TOKEN, viewport=(1280, 800))
    for signed_in in (False, True):
        if signed_in:
            s.sign_in()
        page = s.go("/")
        page.wait_for_selector(f"tr[data-queue='{LONG_QUEUE}']")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 1280, (signed_in, width)
        for name in (LONG_QUEUE, WORDY_QUEUE):
            link = page.locator(f"tr[data-queue='{name}'] td:first-child a")
            assert link.get_attribute("title") == name
            assert name in (link.get_attribute("href") or "")
        shots(page, "overview-1280" + ("-signed-in" if signed_in else ""))


def test_a_replay_and_a_rescue_are_not_styled_as_errors(
    dq: durq.Durq, open_dashboard: Callable[..., Session], shots: Callable[[Page, str], None]
) -> None:
    """On a job's page a replay (an operator's action) and a rescue (its worker died) are
    not red like the attempt that raised; nor is the jobs list's last error of such a job,
    while a job that failed for good keeps its red."""
    ids = populate(dq)
    # a job that raised, was replayed by an operator, then lost its worker (the reaper)
    dq.task(name="flaky", queue="ops", max_attempts=2)(lambda n=0: n)
    store = dq.store
    replayed = dq.enqueue("flaky", {"n": 1}).id
    [c] = store.claim("ops", ["flaky"], 1, 30.0, "w-one")
    tb = 'Traceback (most recent call last):\n  File "app.py", line 1\nOSError: down\n'
    err = AttemptError(1, store.now(), "OSError", "down", tb, "permanent")
    store.finish([Outcome(c.id, c.lease_token, "failed", error=err)])
    dq.retry(replayed)
    store.claim("ops", ["flaky"], 1, 0.05, "w-two")  # a lease it will not extend
    time.sleep(0.2)
    store.reap()
    kinds = [e.kind for e in dq.get(replayed).errors]
    assert kinds == ["permanent", "replayed", "lease_lost"], kinds

    s = open_dashboard(dq)
    page = s.go(f"/jobs/{replayed}")
    rows = page.locator("table.attempts tbody tr")
    assert rows.count() == 3
    error = _rgb(page, "table.attempts tbody tr:nth-child(1) td:nth-child(7)")
    assert _reddish(error), error  # the attempt that raised stays red
    for n in (2, 3):  # the replay, the rescue: their outcome and their text
        for col in (6, 7):
            colour = _rgb(page, f"table.attempts tbody tr:nth-child({n}) td:nth-child({col})")
            assert colour != error and not _reddish(colour), (n, col, colour)
    assert rows.nth(1).get_attribute("data-tone") == "info"
    assert rows.nth(2).get_attribute("data-tone") == "warn"
    shots(page, "job-replayed-and-rescued")

    page = s.go("/jobs?state=queued&queue=ops")
    cell = f"tr[data-id='{replayed}'] td:nth-child(9)"
    assert "LeaseExpired" in page.locator(cell).inner_text()
    assert not _reddish(_rgb(page, cell))
    page = s.go("/failed")  # a job that failed for good: its last error stays red
    assert _reddish(_rgb(page, f"tr[data-id='{ids['failed']}'] td:nth-child(9)"))


def test_click_from_a_chain_step_to_its_parent_and_from_a_tag_to_its_jobs(
    dq: durq.Durq, open_dashboard: Callable[..., Session], shots: Callable[[Page, str], None]
) -> None:
    """From a chain's last step a click on its parent opens the parent's page (and on to the
    first step); a click on a tag opens the jobs list with that tag filled in, listing only
    the tagged jobs. A parent's state is coloured as in the jobs list (a failed one red)."""
    step = dq.task(name="etl.step", queue="etl")(lambda n=0: n)
    tag = "tenant:acme-corp-production-eu-west-1"
    first, middle, last = dq.chain(
        step.s(n=1).options(tags=[tag]), step.s(n=2), step.s(n=3).options(tags=[tag, "x"])
    )
    dq.enqueue("etl.step", {"n": 9}, tags=["other"])
    s = open_dashboard(dq)
    page = s.go(f"/jobs/{last.id}")
    assert "Waits for 1 unfinished parent" in page.locator("#waits-for").inner_text()
    shots(page, "chain-last-step")
    page.click(f"table#parents a[href='/jobs/{middle.id}']")
    page.wait_for_url(f"**/jobs/{middle.id}")
    assert page.locator("h1").inner_text().startswith(f"Job {middle.id}")
    assert page.locator("table#children tr[data-id] td.id").inner_text() == str(last.id)
    page.click(f"table#parents a[href='/jobs/{first.id}']")
    page.wait_for_url(f"**/jobs/{first.id}")
    assert page.locator("table#parents").count() == 0  # the chain's first step has none
    page.click(f"td.tags a.tag:has-text('{tag}')")
    page.wait_for_url("**/jobs?tag=*")
    assert page.locator("#filters input[name=tag]").input_value() == tag
    listed = page.locator("table.jobs tbody tr[data-id]")
    ids = [int(listed.nth(i).get_attribute("data-id") or 0) for i in range(listed.count())]
    assert ids == [last.id, first.id]
    shots(page, "jobs-by-tag")
    # once the first step fails: the middle one names it and both are coloured as "failed"
    fail_now(dq, first.id, "etl.step")
    page = s.go(f"/jobs/{middle.id}")
    cause = page.locator("#cancelled-by")
    assert f"its parent job {first.id} (etl.step) ended failed" in cause.inner_text()
    in_table = _rgb(page, f"table#parents tr[data-id='{first.id}'] td.s-failed")
    assert _reddish(in_table) and _rgb(page, "#cancelled-by .s-failed") == in_table
    page = s.go("/jobs?state=failed")
    assert _rgb(page, f"tr[data-id='{first.id}'] td.s-failed") == in_table
    cause_link = s.go(f"/jobs/{middle.id}").locator(f"#cancelled-by a[href='/jobs/{first.id}']")
    cause_link.click()
    s.page.wait_for_url(f"**/jobs/{first.id}")
    shots(s.page, "cancelling-parent")


#: Every page (each jobs filter too), by name: its path given populate_long's ids.
WIDE_PAGES: dict[str, Callable[[dict[str, int]], str]] = {
    "overview": lambda ids: "/",
    "jobs": lambda ids: "/jobs",
    **{f"jobs-{s}": (lambda ids, s=s: f"/jobs?state={s}") for s in LIST_STATES},
    "jobs-queue": lambda ids: "/jobs?" + urlencode({"queue": dd.LONG_QUEUE}),
    "jobs-task": lambda ids: "/jobs?" + urlencode({"task": dd.LONG_TASK}),
    "jobs-key": lambda ids: "/jobs?" + urlencode({"key": dd.LONG_KEY}),
    "jobs-text": lambda ids: "/jobs?q=Gateway",
    "jobs-time": lambda ids: "/jobs?since=2000-01-01T00:00&until=2100-01-01T00:00",
    "jobs-older": lambda ids: f"/jobs?before={ids['chain'] + 100}",
    "jobs-tag": lambda ids: "/jobs?" + urlencode({"tag": dd.LONG_TAG}),
    "failed": lambda ids: "/failed",
    "failed-tag": lambda ids: "/failed?" + urlencode({"tag": dd.TAGS[0]}),
    "failed-queue": lambda ids: "/failed?" + urlencode({"queue": dd.LONG_QUEUE}),
    "parked": lambda ids: "/parked",
    "job-failed": lambda ids: f"/jobs/{ids['failed']}",
    "job-big-result": lambda ids: f"/jobs/{ids['big']}",
    "job-running": lambda ids: f"/jobs/{ids['running']}",
    "job-parked": lambda ids: f"/jobs/{ids['parked']}",
    "job-chain": lambda ids: f"/jobs/{ids['chain']}",
    "job-chain-first": lambda ids: f"/jobs/{ids['chain_first']}",
    "job-fan-in": lambda ids: f"/jobs/{ids['fan_in']}",
    "job-fan-member": lambda ids: f"/jobs/{ids['fan_member']}",
    "job-cancelled-by-parent": lambda ids: f"/jobs/{ids['cancelled_by_parent']}",
    "batches": lambda ids: "/batches",
    "schedules": lambda ids: "/schedules",
    "limits": lambda ids: "/limits",
    "workers": lambda ids: "/workers",
    "not-found": lambda ids: "/jobs/987654321",
    "bad-filter": lambda ids: "/jobs?" + urlencode({"state": dd.LONG_URL}),
    "flash": lambda ids: "/?" + urlencode({"flash": dd.LONG_URL}),
}


@pytest.mark.parametrize("name", list(WIDE_PAGES))
def test_every_page_fits_a_laptop_screen(
    name: str,
    dq: durq.Durq,
    open_dashboard: Callable[..., Session],
    shots: Callable[[Page, str], None],
) -> None:
    """At 1280x800 no page scrolls sideways (signed out, and signed in with its buttons),
    with long real-world values (issue dash-width): a 52-character queue, an 80-character
    dotted task, a 2,000-character error, a 500-character URL in the payload and result, a
    worker id with a 100-character host. What a page cuts or clamps stays whole in a title
    or on the job's page."""
    ids = dd.populate_long(dq)
    path = WIDE_PAGES[name](ids)
    s = open_dashboard(dq, token=TOKEN, viewport=(1280, 800))
    for signed_in in (False, True):
        if signed_in:
            s.sign_in()
        page = s.go(path)
        width = page.evaluate("document.documentElement.scrollWidth")
        shots(page, name + ("-signed-in" if signed_in else ""))
        assert width <= 1280, (name, signed_in, width)
    whole = WHOLE.get(name)
    if whole is not None:
        whole(page, ids)


def _whole_in_list(page: Page, ids: dict[str, int]) -> None:
    row = page.locator(f"tr[data-id='{ids['failed']}']")
    assert row.locator("td.queue .clamp").get_attribute("title") == dd.LONG_QUEUE
    assert row.locator("td.task .clamp").get_attribute("title") == dd.LONG_TASK
    assert row.locator("td.task").inner_text().strip() == dd.LONG_TASK  # <wbr> adds nothing
    error = row.locator("td.last-error .clamp").get_attribute("title") or ""
    assert error.startswith("HTTPError: " + dd.LONG_MESSAGE[:480]), error[:80]


def _whole_on_job_page(page: Page, ids: dict[str, int]) -> None:
    kv = page.locator("table.kv")
    for value in (dd.LONG_TASK, dd.LONG_QUEUE, dd.LONG_KEY, dd.LONG_WORKER):
        assert value in kv.inner_text(), value
    assert page.locator("section.attempt p").inner_text() == "HTTPError: " + dd.LONG_MESSAGE
    assert dd.LONG_URL in page.locator("pre.payload").inner_text()
    _whole_tags(page, ids)


def _whole_tags(page: Page, ids: dict[str, int]) -> None:
    tags = page.locator("table.kv td.tags a.tag")
    assert tags.all_inner_texts() == sorted((*dd.TAGS, dd.LONG_TAG))  # <wbr> adds nothing


def _whole_fan_in(page: Page, ids: dict[str, int]) -> None:
    assert page.locator("table#parents tbody tr[data-id]").count() == 50
    assert f"and {dd.FAN_IN - 50} more" in page.locator("table#parents tr.rest").inner_text()
    assert f"Waits for {dd.FAN_IN} unfinished parents" in page.locator("#waits-for").inner_text()


def _whole_worker(page: Page, ids: dict[str, int]) -> None:
    row = page.locator(f"tr[data-worker='{dd.LONG_WORKER}']")
    assert row.locator("td").first.inner_text() == dd.LONG_WORKER


#: What a page must still show whole, once it fits.
WHOLE: dict[str, Callable[[Page, dict[str, int]], None]] = {
    "jobs": _whole_in_list, "failed": _whole_in_list, "job-failed": _whole_on_job_page,
    "workers": _whole_worker, "job-fan-in": _whole_fan_in,
}  # fmt: skip
