"""The proving tools: ``durq verify`` and ``durq soak``.

Both run durq the way a user does, on the user's own database, with real ``durq worker``
processes that they kill on purpose, and count what the delivery contract forbids (lost
jobs, duplicate runs nothing explains) and what would show a slow failure (worker RSS and
database size that keep growing).

- :mod:`durq.proving.verify` and :mod:`durq.proving.soak`: the two drivers (their reports
  in :mod:`~durq.proving.verify_report` and :mod:`~durq.proving.soak_report`; the soak's
  settings and producer in :mod:`~durq.proving.soak_mix`, what it watches in
  :mod:`~durq.proving.soak_observe`);
- :mod:`durq.proving.verify_app` and :mod:`durq.proving.soak_app`: the task apps their
  workers run (``durq worker durq.proving.verify_app:dq`` and ``...soak_app:dq``);
- :mod:`durq.proving.runs`: the runs file the tasks append to and the drivers read;
- :mod:`durq.proving.processes`: starts, signals, watches and stops the worker processes;
- :mod:`durq.proving.session`: the empty-queue check before a run, the clean-up after it;
- :mod:`durq.proving.report`: what both reports share (the verdict, tables, URLs).

The package sits on top of durq: it may import anything in durq, and nothing in durq outside
``durq.proving`` and ``durq.cli`` imports it. It imports nothing itself, so a worker that
loads one of the task apps loads only what that app needs.
"""
