"""durq's benchmark harness: ``python -m bench`` (see bench/README.md).

Measures durq (enqueue, drain, idle pickup latency, memory, speed against history) and
two SQLite-backed peers (huey's ``SqliteHuey`` and persist-queue's ``SQLiteAckQueue``) in
the same run, on the same machine, each case in a fresh temporary directory.
"""
