"""Middleware from Python (issue 23): `awa.Middleware` around a client's
enqueues and a worker's attempts, sync and async alike. The first added
is outermost; a tenant set around the handler reaches it; logging and
metrics see the outcome; a refused enqueue writes nothing; an exception
raised by middleware around execution is a failed attempt that is
retried under the retry policy."""

from __future__ import annotations

import asyncio
import contextvars
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

import awa
from conftest import running, wait_for, wait_state

TENANT: contextvars.ContextVar[str | None] = contextvars.ContextVar("tenant", default=None)


@awa.job("mw_job", queue="py_mw")
@dataclass
class Job:
    n: int


class Recorder(awa.Middleware):
    """Records its name before and after the work, sync and async."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    def on_enqueue(self, jobs: list[awa.WithOptions], call_next: Any) -> list[awa.Enqueued]:
        self.log.append(f"{self.name} enqueue before {len(jobs)}")
        out = call_next(jobs)
        self.log.append(f"{self.name} enqueue after {[r.inserted for r in out]}")
        return out

    async def on_enqueue_async(self, jobs: list[awa.WithOptions], call_next: Any) -> list[awa.Enqueued]:
        self.log.append(f"{self.name} async enqueue before {len(jobs)}")
        out = await call_next(jobs)
        self.log.append(f"{self.name} async enqueue after")
        return out

    def around_execute(self, ctx: awa.Context, call_next: Any) -> Any:
        self.log.append(f"{self.name} before {ctx.job_id}")
        try:
            return call_next(ctx)
        finally:
            self.log.append(f"{self.name} after {ctx.job_id}")

    async def around_execute_async(self, ctx: awa.Context, call_next: Any) -> Any:
        self.log.append(f"{self.name} async before {ctx.job_id}")
        try:
            return await call_next(ctx)
        finally:
            self.log.append(f"{self.name} async after {ctx.job_id}")


class Tenants(awa.Middleware):
    """Every job carries the caller's tenant (none: refused); every
    attempt runs with its job's tenant in TENANT."""

    @staticmethod
    def stamp(jobs: list[awa.WithOptions]) -> list[awa.WithOptions]:
        tenant = TENANT.get()
        if tenant is None:
            raise awa.Refused("no tenant in scope")
        for job in jobs:
            job.metadata = {**(job.metadata or {}), "tenant": tenant}
        return jobs

    def on_enqueue(self, jobs: list[awa.WithOptions], call_next: Any) -> list[awa.Enqueued]:
        return call_next(self.stamp(jobs))

    async def on_enqueue_async(self, jobs: list[awa.WithOptions], call_next: Any) -> list[awa.Enqueued]:
        return await call_next(self.stamp(jobs))

    def around_execute(self, ctx: awa.Context, call_next: Any) -> Any:
        token = TENANT.set((ctx.metadata or {}).get("tenant"))
        try:
            return call_next(ctx)
        finally:
            TENANT.reset(token)

    async def around_execute_async(self, ctx: awa.Context, call_next: Any) -> Any:
        token = TENANT.set((ctx.metadata or {}).get("tenant"))
        try:
            return await call_next(ctx)
        finally:
            TENANT.reset(token)


class Metrics(awa.Middleware):
    """Counts outcomes as a metrics middleware would."""

    def __init__(self) -> None:
        self.outcomes: list[tuple[int, int, str]] = []

    def around_execute(self, ctx: awa.Context, call_next: Any) -> Any:
        try:
            result = call_next(ctx)
        except Exception as e:
            self.outcomes.append((ctx.job_id, ctx.attempt, type(e).__name__))
            raise
        self.outcomes.append((ctx.job_id, ctx.attempt, type(result).__name__))
        return result


def count(db_url: str, queue: str) -> int:
    with psycopg.connect(db_url) as conn:
        return conn.execute("SELECT count(*) FROM awa.jobs WHERE queue = %s", (queue,)).fetchone()[0]


def test_order_is_outermost_first_for_enqueue_and_sync_and_async_execution(db_url: str) -> None:
    log: list[str] = []
    client = awa.Client(db_url, middleware=[Recorder("a", log)]).use(Recorder("b", log))
    with psycopg.connect(db_url) as conn:
        first, second = client.enqueue_many(conn, [Job(n=1), Job(n=2)])
    assert log == ["a enqueue before 2", "b enqueue before 2", "b enqueue after [True, True]",
                   "a enqueue after [True, True]"]
    log.clear()

    # The client's middleware comes first, then the worker's own.
    def handler(job: Job, ctx: awa.Context) -> None:
        log.append(f"handler {ctx.job_id}")

    worker = client.worker(queues={"py_mw": 1}).use(Recorder("c", log)).register(Job, handler)
    assert awa.testing.work_one(worker, "py_mw")["state"] == "completed"
    assert log == [f"a before {first.id}", f"b before {first.id}", f"c before {first.id}",
                   f"handler {first.id}",
                   f"c after {first.id}", f"b after {first.id}", f"a after {first.id}"]
    log.clear()

    async def ahandler(job: Job, ctx: awa.Context) -> None:
        await asyncio.sleep(0)
        log.append(f"handler {ctx.job_id}")

    worker = client.worker(queues={"py_mw": 1}).use(Recorder("c", log)).register(Job, ahandler)
    assert awa.testing.work_one(worker, "py_mw")["state"] == "completed"
    i = second.id
    assert log == [f"a async before {i}", f"b async before {i}", f"c async before {i}", f"handler {i}",
                   f"c async after {i}", f"b async after {i}", f"a async after {i}"]


def test_the_tenant_reaches_the_handler_and_a_refused_enqueue_writes_nothing(db_url: str) -> None:
    client = awa.Client(db_url, middleware=[Tenants()])
    with psycopg.connect(db_url) as conn:
        with pytest.raises(awa.Refused, match="no tenant"):
            client.enqueue(conn, Job(n=1), queue="py_mw_tenant")
        # The caller's transaction goes on; nothing of the refused call is in it.
        token = TENANT.set("acme")
        try:
            kept = client.enqueue(conn, Job(n=2), queue="py_mw_tenant", metadata={"user": 7})
        finally:
            TENANT.reset(token)
    assert count(db_url, "py_mw_tenant") == 1
    assert client.get_job(kept.id)["metadata"] == {"user": 7, "tenant": "acme"}

    seen: list[Any] = []

    def handler(job: Job) -> None:
        seen.append((job.n, TENANT.get()))

    worker = client.worker(queues={"py_mw_tenant": 1}).register(Job, handler)
    with running(worker):
        wait_state(client, kept.id, "completed")
    assert seen == [(2, "acme")]
    assert TENANT.get() is None


def test_async_connections_and_handlers_pass_the_async_twins(db_url: str) -> None:
    client = awa.Client(db_url, middleware=[Tenants()])

    async def produce() -> int:
        async with await psycopg.AsyncConnection.connect(db_url) as conn:
            with pytest.raises(awa.Refused):
                await client.enqueue(conn, Job(n=1), queue="py_mw_async")
            token = TENANT.set("globex")
            try:
                return (await client.enqueue(conn, Job(n=3), queue="py_mw_async")).id
            finally:
                TENANT.reset(token)

    job_id = asyncio.run(produce())  # the connection commits as its block ends
    assert count(db_url, "py_mw_async") == 1

    seen: list[Any] = []

    async def handler(job: Job) -> None:
        await asyncio.sleep(0)
        seen.append(TENANT.get())

    worker = client.worker(queues={"py_mw_async": 1}).register(Job, handler)
    awa.testing.work_one(worker, "py_mw_async")
    assert seen == ["globex"]
    assert client.get_job(job_id)["state"] == "completed"


def test_a_sync_only_middleware_is_refused_where_the_async_twin_is_needed(db_url: str) -> None:
    async def ahandler(job: Job) -> None:
        return None

    with pytest.raises(TypeError, match="around_execute_async"):
        awa.Client(db_url).worker(queues={"py_mw": 1}).use(Metrics()).register(Job, ahandler)
    with pytest.raises(TypeError, match="around_execute_async"):
        awa.Client(db_url).worker(queues={"py_mw": 1}).register(Job, ahandler).use(Metrics())

    class SyncOnly(awa.Middleware):
        def on_enqueue(self, jobs: Any, call_next: Any) -> Any:
            raise awa.Refused("never")

    async def enqueue_async() -> None:
        async with await psycopg.AsyncConnection.connect(db_url) as conn:
            await awa.Client(db_url, middleware=[SyncOnly()]).enqueue(conn, Job(n=1), queue="py_mw_sync_only")
            await conn.commit()

    with pytest.raises(TypeError, match="on_enqueue_async"):
        asyncio.run(enqueue_async())
    assert count(db_url, "py_mw_sync_only") == 0
    with pytest.raises(TypeError):
        awa.Client(db_url, middleware=[object()])  # type: ignore[list-item]


def test_metrics_see_the_outcome_and_a_middleware_error_is_a_retried_attempt(db_url: str) -> None:
    class Flaky(awa.Middleware):
        """Raises on a job's first attempt, before the handler runs."""

        def around_execute(self, ctx: awa.Context, call_next: Any) -> Any:
            if ctx.attempt == 1:
                raise RuntimeError("the metrics backend is down")
            return call_next(ctx)

    metrics = Metrics()
    ran: list[int] = []
    snoozes: list[int] = []
    client = awa.Client(db_url, middleware=[metrics, Flaky()])
    with psycopg.connect(db_url) as conn:
        job_id = client.enqueue(conn, Job(n=5), queue="py_mw_retry", max_attempts=3).id
        snoozed = client.enqueue(conn, Job(n=6), queue="py_mw_retry").id

    def handler(job: Job, ctx: awa.Context) -> Any:
        ran.append(ctx.attempt)
        if job.n == 6 and ctx.attempt == 2 and not snoozes:
            snoozes.append(ctx.job_id)  # once: a snooze keeps the attempt number
            return awa.Snooze(0.1)
        return None

    worker = client.worker(queues={"py_mw_retry": 2}).register(Job, handler, retry=awa.FixedBackoff(0.1))
    with running(worker):
        job = wait_state(client, job_id, "completed")
        wait_state(client, snoozed, "completed")
        wait_for("metrics to see every attempt", lambda: len(metrics.outcomes) == 5)

    attempts = job["attempts"]
    assert [a["outcome"] for a in attempts] == ["retried", "completed"], attempts
    assert "the metrics backend is down" in attempts[0]["error"]
    # The handler never ran on a first attempt: the middleware failed it.
    assert sorted(ran) == [2, 2, 2]
    assert sorted(metrics.outcomes) == sorted([
        (job_id, 1, "RuntimeError"), (job_id, 2, "NoneType"),
        (snoozed, 1, "RuntimeError"), (snoozed, 2, "Snooze"), (snoozed, 2, "NoneType"),
    ])
