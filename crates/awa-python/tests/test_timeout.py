"""Job timeouts from Python (issue 23): a kind's default from
`@awa.job(timeout=...)` or `Worker.register(..., timeout=...)`, a job's own
from `awa.enqueue(..., timeout=...)` (it wins). At the deadline an async
handler's task is cancelled, a sync one is abandoned (its slot freed,
`ctx.is_cancelled()` True) and the attempt fails with a timeout error
within the timeout plus one second, retried until its attempts are used
up."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

import psycopg
import pytest

import awa
from conftest import running, wait_for, wait_state


@awa.job("py_slow", queue="py_timeouts", max_attempts=2, timeout=0.5)
@dataclass
class Slow:
    seconds: float


def assert_timed_out(job: dict, timeout: float, outcomes: list[str]) -> None:
    attempts = job["attempts"]
    assert [a["outcome"] for a in attempts] == outcomes, attempts
    for a in attempts:
        assert a["error"].startswith("timeout:"), a
        ran = (datetime.fromisoformat(a["ended_at"]) - datetime.fromisoformat(a["started_at"])).total_seconds()
        assert timeout <= ran <= timeout + 1.0, f"ended {ran:.3f} s after its claim: {a}"


def test_an_async_handler_over_its_kinds_timeout_is_cancelled_and_retried(
    db_url: str, client: awa.Client
) -> None:
    with psycopg.connect(db_url) as conn:
        job_id = awa.enqueue(conn, Slow(seconds=1800)).id
        quick = awa.enqueue(conn, Slow(seconds=0.01)).id
    events: list[str] = []

    async def slow(job: Slow, ctx: awa.Context) -> None:
        try:
            await asyncio.sleep(job.seconds)
        except asyncio.CancelledError:
            events.append(f"cancelled {ctx.attempt}")
            raise

    worker = client.worker(queues={"py_timeouts": 2}).register(Slow, slow, retry=awa.FixedBackoff(0.1))
    with running(worker) as out:
        job = wait_state(client, job_id, "failed")
        wait_state(client, quick, "completed")
        wait_for("both tasks cancelled", lambda: len(events) == 2)
    assert_timed_out(job, 0.5, ["retried", "failed"])
    assert sorted(events) == ["cancelled 1", "cancelled 2"]
    assert (out["stats"]["retried"], out["stats"]["failed"], out["stats"]["completed"]) == (1, 1, 1)


def test_a_sync_handler_over_a_jobs_own_timeout_is_abandoned(db_url: str, client: awa.Client) -> None:
    """The job's own 0.3 s wins over the kind's hour; the sync handler
    cannot be stopped: it is abandoned, sees the cancel, and its slot (the
    only one) serves the next job while it still runs."""
    with psycopg.connect(db_url) as conn:
        first = awa.enqueue(
            conn, awa.RawJob("stuck", {}, queue="py_timeouts_sync", max_attempts=1), timeout=timedelta(milliseconds=300)
        ).id
    assert client.get_job(first)["metadata"] == {"awa_timeout_ms": 300}
    started = threading.Event()
    release = threading.Event()
    events: list[str] = []

    def stuck(args: dict, ctx: awa.Context) -> None:
        if ctx.job_id != first:
            events.append("next ran")
            return
        started.set()
        told = ctx.wait_cancelled(120)
        events.append(f"told {told}")
        release.wait(120)

    worker = client.worker(queues={"py_timeouts_sync": 1}).register("stuck", stuck, timeout=3600)
    with running(worker):
        assert started.wait(60)
        job = wait_state(client, first, "failed")
        wait_for("the handler to see the cancel", lambda: "told True" in events)
        with psycopg.connect(db_url) as conn:
            second = awa.enqueue(conn, awa.RawJob("stuck", {}, queue="py_timeouts_sync")).id
        wait_state(client, second, "completed")
        release.set()
    assert_timed_out(job, 0.3, ["failed"])
    assert events == ["told True", "next ran"]


def test_timeouts_are_checked_where_they_are_written() -> None:
    for bad in (0, -1, 8 * 86400, "30", True):
        with pytest.raises(awa.ValidationError):
            awa.job("x", timeout=bad)  # type: ignore[arg-type]
        with pytest.raises(awa.ValidationError):
            awa.enqueue(None, awa.RawJob("x", {}), timeout=bad)  # type: ignore[arg-type]
    with pytest.raises(awa.ValidationError):
        awa.enqueue(None, awa.RawJob("x", {}), timeout=1, metadata=[1])  # type: ignore[arg-type]
