"""durq.shield: an interruption asked for while a thread is inside a shield waits for the
shield's exit (real threads, real ``PyThreadState_SetAsyncExc``), and a BodyGuard raises
into a body only through it."""

from __future__ import annotations

import threading
import time

import durq
from durq import shield
from durq.worker.interrupt import BodyGuard


class Boom(BaseException):
    pass


def test_a_shielded_thread_gets_the_exception_only_as_it_leaves() -> None:
    inside = threading.Event()
    asked = threading.Event()
    got: list[str] = []

    def run() -> None:
        try:
            with shield.shielded():
                with shield.shielded():  # nested: only the outermost exit raises
                    inside.set()
                    assert asked.wait(10)
                    for _ in range(200):  # bytecode that would see a pending exception
                        time.sleep(0.001)
                got.append("inner left")
                for _ in range(200):
                    time.sleep(0.001)
                got.append("outer body done")
            for _ in range(1000):
                time.sleep(0.001)
            got.append("not interrupted")
        except Boom:
            got.append("raised")

    thread = threading.Thread(target=run)
    thread.start()
    assert inside.wait(10)
    assert shield.is_shielded(thread.ident or 0)
    assert not shield.interrupt(thread.ident or 0, Boom)  # held for the shield's exit
    asked.set()
    thread.join(10)
    assert got == ["inner left", "outer body done", "raised"]
    assert not shield.is_shielded(thread.ident or 0)


def test_an_unshielded_thread_is_interrupted_at_once() -> None:
    started = threading.Event()
    got: list[float] = []

    def run() -> None:
        started.set()
        t0 = time.monotonic()
        try:
            while time.monotonic() - t0 < 10:
                time.sleep(0.001)
        except Boom:
            got.append(time.monotonic() - t0)

    thread = threading.Thread(target=run)
    thread.start()
    assert started.wait(10)
    assert shield.interrupt(thread.ident or 0, Boom)
    thread.join(10)
    assert len(got) == 1 and got[0] < 5


def test_a_body_inside_a_shield_is_interrupted_after_it() -> None:
    """What the store does for a body (a ``ctx.progress`` in a loop): the guard's raise
    never lands inside the shielded part; the body stops right after it."""
    guard = BodyGuard()
    spans: list[str] = []
    started = threading.Event()

    def body() -> None:
        started.set()
        while True:
            with shield.shielded():
                spans.append("in")
                for _ in range(50):
                    time.sleep(0.001)
                spans.append("out")

    def run() -> None:
        try:
            guard.run(body)
        except durq.Interrupted as exc:
            spans.append(exc.reason)

    thread = threading.Thread(target=run)
    thread.start()
    assert started.wait(10)
    for _ in range(20):
        guard.interrupt("timeout")
        time.sleep(0.007)
        if not thread.is_alive():
            break
    thread.join(10)
    assert spans[-1] == "timeout"
    pairs = spans[:-1]
    assert pairs == ["in", "out"] * (len(pairs) // 2)  # every shielded part ran whole
