"""Helpers for users' unit tests, as the Rust client's `awa::testing`.

    worker = awa.Client(url).worker(queues={"email": 1}).register(SendEmail, send)
    with psycopg.connect(url) as conn:
        awa.enqueue(conn, SendEmail(to="a@example.com"))
    outcome = awa.testing.work_one(worker, "email")
    assert outcome["state"] == "completed"
"""

from __future__ import annotations

from typing import Any

from ._worker import Worker


def work_one(worker: Worker, queue: str) -> dict[str, Any] | None:
    """Claim one runnable job of `queue`, run its registered handler here
    (sync handlers on a thread, async ones on a loop of their own), with
    the worker's retry policies and timeouts, and record the result, as a
    running worker would; no worker is started and hooks are not called.
    Returns None when nothing of `queue` is runnable now, else the
    outcome: ``job_id``, ``run_lease``, ``kind``, ``queue``, ``attempt``,
    ``accepted`` (False: the attempt was cancelled meanwhile and nothing
    was written) and ``state`` (where the job went: completed, retryable,
    snoozed, cancelled, failed, dead_lettered; None when not accepted).
    Jobs are claimed in the queue's order (priority, then enqueue
    order). The worker can still `run()` afterwards."""
    return worker._work_one(queue)
