"""Python handlers on the Rust runtime: outcomes (retry with backoff,
fail, dead-letter, snooze, cancel, retry-after), the context (attempt,
metadata, heartbeat, checkpoints, is_cancelled), async handlers, and the
admin reads (job, queue stats, DLQ list/retry)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import psycopg
import pytest

import awa
from conftest import awa_cli, running, wait_for, wait_state


@dataclass
class Job:
    tag: str


def enqueue(url: str, queue: str, kind: str, **options: object) -> int:
    with psycopg.connect(url) as conn:
        return awa.enqueue(conn, awa.RawJob(kind, {"tag": kind}, queue=queue), **options).id


def typed(kind: str, queue: str, **kw: object) -> type:
    return awa.job(kind, queue=queue, **kw)(type(f"T_{kind}", (Job,), {"__annotations__": {}}))


def test_an_exception_retries_with_backoff_then_fails(db_url: str, client: awa.Client) -> None:
    job_id = enqueue(db_url, "py_boom", "boom", max_attempts=3)
    attempts: list[int] = []

    def boom(args: dict, ctx: awa.Context) -> None:
        attempts.append(ctx.attempt)
        if ctx.attempt < 3:
            raise RuntimeError("kaboom")
        raise RuntimeError("kaboom " + "x" * 20_000 + " END")  # a long error: bounded

    worker = client.worker(queues={"py_boom": 2}).register(
        "boom", boom, retry=awa.FixedBackoff(0.2)
    )
    with running(worker) as out:
        job = wait_state(client, job_id, "failed")
    assert attempts == [1, 2, 3]
    assert job["attempt"] == 3
    err = job["last_error"]
    assert len(err.encode()) <= 8 * 1024, "the traceback is bounded"
    assert "truncated" in err and err.rstrip().endswith("END"), "its tail is kept"
    assert out["stats"]["retried"] == 2 and out["stats"]["failed"] == 1


def test_fail_dead_letters_on_an_opted_in_queue_and_retry_brings_it_back(
    db_url: str, client: awa.Client
) -> None:
    awa_cli(db_url, "queue", "configure", "py_dlq", "--dlq", "on")
    job_id = enqueue(db_url, "py_dlq", "doomed")
    runs: list[int] = []

    def doomed(args: dict, ctx: awa.Context) -> None:
        runs.append(ctx.attempt)
        if len(runs) == 1:
            raise awa.Fail("permanently broken")

    worker = client.worker(queues={"py_dlq": 1}).register("doomed", doomed)
    with running(worker):
        wait_state(client, job_id, "dead_lettered")
        [entry] = client.dlq_list(queue="py_dlq")
        assert entry["job_id"] == job_id and entry["last_error"] == "permanently broken"
        assert runs == [1], "Fail does not retry"
        assert client.dlq_retry(job_id)["retried"] == [job_id]
        wait_state(client, job_id, "completed")
    assert client.dlq_list(queue="py_dlq") == []


def test_snooze_cancel_retry_after_and_complete(db_url: str, client: awa.Client) -> None:
    snoozy = enqueue(db_url, "py_out", "snoozy")
    cancelled = enqueue(db_url, "py_out", "cancel_me")
    later = enqueue(db_url, "py_out", "later")
    seen: dict[str, list[int]] = {"snoozy": [], "later": []}

    def snooze(args: dict, ctx: awa.Context) -> object:
        seen["snoozy"].append(ctx.attempt)
        return awa.Snooze(0.1) if len(seen["snoozy"]) == 1 else None

    def retry_after(args: dict, ctx: awa.Context) -> None:
        seen["later"].append(ctx.attempt)
        if ctx.attempt == 1:
            raise awa.RetryAfter(0.1, "not yet")

    worker = (
        client.worker(queues={"py_out": 4})
        .register("snoozy", snooze)
        .register("cancel_me", lambda args: awa.Cancel("not wanted"))
        .register("later", retry_after)
    )
    with running(worker):
        wait_state(client, snoozy, "completed")
        job = wait_state(client, cancelled, "cancelled")
        wait_state(client, later, "completed")
    assert seen["snoozy"] == [1, 1], "a snooze does not count as an attempt"
    assert seen["later"] == [1, 2]
    assert "not wanted" in (job["last_error"] or "")


def test_context_metadata_heartbeat_checkpoint(db_url: str, client: awa.Client) -> None:
    Step = typed("stepper", "py_ctx", max_attempts=3)
    with psycopg.connect(db_url) as conn:
        job_id = awa.enqueue(conn, Step(tag="t"), metadata={"who": "test"}).id
    seen: list[tuple] = []

    def step(job: Job, ctx: awa.Context) -> None:
        seen.append((ctx.attempt, ctx.metadata, ctx.checkpoint(), job.tag, ctx.kind, ctx.queue))
        assert ctx.heartbeat(50, "half way")
        if ctx.attempt == 1:
            # A checkpoint PostgreSQL cannot store is the handler's
            # ValidationError, not a database error.
            with pytest.raises(awa.ValidationError, match="NUL"):
                ctx.save_checkpoint({"bad": "\x00"})
            assert ctx.save_checkpoint({"done": 5})
            raise awa.RetryAfter(0.05)

    worker = client.worker(queues={"py_ctx": 1}).register(Step, step)
    with running(worker):
        wait_state(client, job_id, "completed")
    assert seen == [
        (1, {"who": "test"}, None, "t", "stepper", "py_ctx"),
        (2, {"who": "test"}, {"done": 5}, "t", "stepper", "py_ctx"),
    ]


def test_is_cancelled_after_an_operator_cancel(db_url: str, client: awa.Client) -> None:
    job_id = enqueue(db_url, "py_long", "long")
    started = threading.Event()
    saw: list[bool] = []

    def long(args: dict, ctx: awa.Context) -> None:
        started.set()
        # Heartbeat until the attempt is no longer ours.
        wait_for("the cancel to reach the handler", lambda: not ctx.heartbeat() or None)
        saw.append(ctx.is_cancelled())

    worker = client.worker(queues={"py_long": 1}).register("long", long)
    with running(worker):
        assert started.wait(60)
        assert client.cancel(job_id) == "running"
        wait_for("the handler to return", lambda: saw)
        wait_state(client, job_id, "cancelled")
    assert saw == [True]


def test_async_handlers_run_on_one_loop(db_url: str, client: awa.Client) -> None:
    ok = enqueue(db_url, "py_async", "async_ok")
    bad = enqueue(db_url, "py_async", "async_bad", max_attempts=1)
    loops: set[int] = set()

    async def good(args: dict, ctx: awa.Context) -> None:
        import asyncio

        loops.add(id(asyncio.get_running_loop()))
        assert await ctx.aheartbeat(10)
        await asyncio.sleep(0.01)

    async def raises(args: dict, ctx: awa.Context) -> None:
        raise ValueError("async trouble")

    worker = (
        client.worker(queues={"py_async": 8})
        .register("async_ok", good)
        .register("async_bad", raises)
    )
    with running(worker):
        wait_state(client, ok, "completed")
        job = wait_state(client, bad, "failed")
    assert len(loops) == 1
    assert "Traceback" in job["last_error"]
    assert "ValueError: async trouble" in job["last_error"]


def test_args_that_do_not_fit_the_type_fail_at_once(db_url: str, client: awa.Client) -> None:
    Strict = typed("strict", "py_strict")
    job_id = enqueue(db_url, "py_strict", "strict")  # args {"tag": ...} fit
    with psycopg.connect(db_url) as conn:
        misfit = awa.enqueue(conn, awa.RawJob("strict", {"nope": 1}, queue="py_strict")).id
    worker = client.worker(queues={"py_strict": 2}).register(Strict, lambda job: None)
    with running(worker):
        wait_state(client, job_id, "completed")
        job = wait_state(client, misfit, "failed")
    assert job["attempt"] == 1 and "do not match" in job["last_error"]


def test_admin_reads(client: awa.Client) -> None:
    assert client.get_job(987654321) is None
    stats = client.queue_stats()
    assert "py_boom" in stats and stats["py_boom"]["failed"] == 1
    with pytest.raises(awa.ValidationError):
        client.queue_stats("bad queue!")
