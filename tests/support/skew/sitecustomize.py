"""Skews this process's wall clock by ``$DURQ_TEST_CLOCK_SKEW`` seconds (tests only).

Put this folder on PYTHONPATH of a child process to give it a wrong clock, as a
misconfigured host would have: ``time.time`` and ``time.time_ns`` move (durq reads no
other wall clock); ``time.monotonic`` does not (like a wrong wall clock on a real machine). Debian's
libfaketime 0.9.10 breaks CPython 3.11's ``time.sleep`` (EINVAL from clock_nanosleep),
so the tests cannot use it.
"""

from __future__ import annotations

import os
import time as _time

_skew = float(os.environ.get("DURQ_TEST_CLOCK_SKEW", "0") or 0)
if _skew:
    _real_time, _real_time_ns = _time.time, _time.time_ns

    def _time_skewed() -> float:
        return _real_time() + _skew

    def _time_ns_skewed() -> int:
        return _real_time_ns() + int(_skew * 1e9)

    _time.time = _time_skewed
    _time.time_ns = _time_ns_skewed
