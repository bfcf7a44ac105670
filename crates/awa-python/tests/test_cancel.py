"""Cancel of a running job from Python: the handler learns of it at once
(`ctx.is_cancelled()`, `ctx.wait_cancelled()`, `await ctx.cancelled()`),
and one that does not stop is given up `cancel_grace` later: an async
handler's task is cancelled, a sync one is abandoned; either way its slot
is freed (at concurrency 1, the next job runs) and its result ignored."""

from __future__ import annotations

import asyncio
import threading

import psycopg

import awa
from conftest import running, wait_for, wait_state


def enqueue(url: str, queue: str, kind: str) -> int:
    with psycopg.connect(url) as conn:
        return awa.enqueue(conn, awa.RawJob(kind, {}, queue=queue)).id


def cancel_when_started(client: awa.Client, started: threading.Event, job_id: int) -> None:
    assert started.wait(60), "the handler did not start"
    assert client.cancel(job_id) == "running"


def test_a_sync_handler_learns_of_the_cancel_at_once(db_url: str, client: awa.Client) -> None:
    """With a cancel grace of ten minutes, only the cancel's notification
    can tell the handler in time: `wait_cancelled` returns True."""
    job_id = enqueue(db_url, "py_cancel_sync", "wait")
    started = threading.Event()
    saw: list[tuple[bool, bool, bool]] = []

    def wait(args: dict, ctx: awa.Context) -> None:
        before = ctx.wait_cancelled(0.01)
        started.set()
        told = ctx.wait_cancelled(120)
        saw.append((before, told, ctx.is_cancelled()))

    worker = client.worker(queues={"py_cancel_sync": 1}, cancel_grace=600).register("wait", wait)
    with running(worker):
        cancel_when_started(client, started, job_id)
        wait_for("the handler to return", lambda: saw)
        wait_state(client, job_id, "cancelled")
    assert saw == [(False, True, True)]


def test_an_async_handler_awaits_the_cancel(db_url: str, client: awa.Client) -> None:
    job_id = enqueue(db_url, "py_cancel_await", "await_cancel")
    started = threading.Event()
    saw: list[bool] = []

    async def await_cancel(args: dict, ctx: awa.Context) -> None:
        started.set()
        await asyncio.wait_for(ctx.cancelled(), 120)
        saw.append(ctx.is_cancelled())

    worker = client.worker(queues={"py_cancel_await": 1}, cancel_grace=600).register(
        "await_cancel", await_cancel
    )
    with running(worker):
        cancel_when_started(client, started, job_id)
        wait_for("the handler to return", lambda: saw)
        wait_state(client, job_id, "cancelled")
    assert saw == [True]


def test_an_async_handler_that_ignores_the_cancel_is_cancelled(db_url: str, client: awa.Client) -> None:
    first = enqueue(db_url, "py_cancel_async", "sleepy")
    started = threading.Event()
    events: list[str] = []

    async def sleepy(args: dict, ctx: awa.Context) -> None:
        if ctx.job_id != first:
            events.append("next ran")
            return
        started.set()
        try:
            await asyncio.sleep(1800)
        except asyncio.CancelledError:
            events.append("task cancelled")
            raise

    worker = client.worker(queues={"py_cancel_async": 1}, cancel_grace=0.2).register("sleepy", sleepy)
    with running(worker) as out:
        cancel_when_started(client, started, first)
        wait_for("the task to be cancelled", lambda: "task cancelled" in events)
        # Its one slot is free again.
        second = enqueue(db_url, "py_cancel_async", "sleepy")
        wait_state(client, second, "completed")
        wait_state(client, first, "cancelled")
    assert events == ["task cancelled", "next ran"]
    assert out["stats"]["dropped"] == 1


def test_a_sync_handler_that_ignores_the_cancel_is_abandoned(db_url: str, client: awa.Client) -> None:
    first = enqueue(db_url, "py_cancel_stuck", "stuck")
    started = threading.Event()
    release = threading.Event()
    events: list[str] = []

    def stuck(args: dict, ctx: awa.Context) -> None:
        if ctx.job_id != first:
            events.append("next ran")
            return
        started.set()
        # Deaf to the cancel: cannot be stopped, only abandoned.
        release.wait(120)
        events.append("stuck returned")

    worker = client.worker(queues={"py_cancel_stuck": 1}, cancel_grace=0.2).register("stuck", stuck)
    with running(worker) as out:
        cancel_when_started(client, started, first)
        second = enqueue(db_url, "py_cancel_stuck", "stuck")
        # The abandoned handler still runs, yet its slot serves the next job.
        wait_state(client, second, "completed")
        assert events == ["next ran"]
        release.set()
        wait_for("the abandoned handler to return", lambda: "stuck returned" in events)
    # Whatever it returned was ignored: the job stays cancelled.
    assert client.get_job(first)["state"] == "cancelled"
    assert out["stats"]["dropped"] == 1
    assert out["stats"]["completed"] == 1


def test_admin_reads_say_running_and_buffered_apart(db_url: str, client: awa.Client) -> None:
    """At concurrency 2 with a third job claimed into the worker's buffer,
    Python's reads say 2 running and 1 buffered (they said 3 running)."""
    with psycopg.connect(db_url) as conn:
        ids = [j.id for j in awa.enqueue_many(conn, [awa.RawJob("hold", {}, queue="py_buffered")] * 3)]
    started: list[int] = []
    lock = threading.Lock()

    def hold(args: dict, ctx: awa.Context) -> None:
        with lock:
            started.append(ctx.job_id)
        ctx.wait_cancelled(120)

    def counts() -> tuple[int, int]:
        s = client.queue_stats("py_buffered")["py_buffered"]
        return s.get("running", 0), s.get("buffered", 0)

    worker = client.worker(queues={"py_buffered": 2}, cancel_grace=600).register("hold", hold)
    with running(worker):
        wait_for("2 running and 1 buffered", lambda: counts() == (2, 1))
        first, second = started[:2]
        (third,) = set(ids) - {first, second}
        assert client.get_job(first)["state"] == "running"
        assert client.get_job(third)["state"] == "buffered"
        client.cancel(first)
        wait_for("the buffered job to start", lambda: third in started)
        wait_for("2 running and none buffered", lambda: counts() == (2, 0))
        assert client.get_job(third)["state"] == "running"
        client.cancel(second)
        client.cancel(third)
