"""What the Rust client has, from Python (issue 23): cron schedules
declared from code (`Worker.cron`, `prune_schedules`), lifecycle hooks
(`on_event`, `on_completed`, `on_failed`, `on_dead_lettered`: once per
committed result, in commit order) and the unit-test helper
`awa.testing.work_one`."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass

import psycopg
import pytest

import awa
from conftest import awa_cli, running, wait_for, wait_state


@awa.job("py_tick", queue="py_cron")
@dataclass
class Tick:
    source: str


def test_a_schedule_declared_from_code_fires_and_prune_removes_the_rest(db_url: str, client: awa.Client) -> None:
    # A schedule this code does not declare: pruned at start.
    awa_cli(db_url, "cron", "add", "stale", "--cron", "@daily", "--queue", "py_cron", "--kind", "py_tick")
    ticks: list[awa.JobEvent] = []
    lock = threading.Lock()

    def tick(job: Tick) -> None:
        assert job.source == "code"

    def completed(event: awa.JobEvent) -> None:
        with lock:
            ticks.append(event)

    worker = (
        client.worker(queues={"py_cron": 1})
        .register(Tick, tick)
        .cron("every_second", "* * * * * *", Tick(source="code"), catch_up=1)
        .prune_schedules()
        .on_completed(completed)
    )
    with running(worker):
        wait_for("two ticks to run", lambda: len(ticks) >= 2)
    listed = json.loads(awa_cli(db_url, "--json", "cron", "list").stdout)
    names = [s["name"] for s in (listed if isinstance(listed, list) else listed["schedules"])]
    assert names == ["every_second"], listed
    assert {(e.kind, e.queue, e.state) for e in ticks} == {("py_tick", "py_cron", "completed")}
    # Each tick's job ran once: distinct jobs.
    assert len({e.job_id for e in ticks}) == len(ticks)

    for bad in (
        lambda w: w.cron("bad name!", "@daily", Tick(source="x")),
        lambda w: w.cron("bad_expr", "61 * * * *", Tick(source="x")),
        lambda w: w.cron("bad_zone", "@daily", Tick(source="x"), timezone="Mars/Olympus"),
        lambda w: w.cron("bad_catch_up", "@daily", Tick(source="x"), catch_up=0),
    ):
        with pytest.raises(awa.ValidationError):
            bad(client.worker(queues={"py_cron": 1}))


def test_hooks_report_each_committed_result_once_in_order(db_url: str, client: awa.Client) -> None:
    with psycopg.connect(db_url) as conn:
        ok = awa.enqueue(conn, awa.RawJob("hooked", {"fail": False}, queue="py_hooks")).id
        bad = awa.enqueue(conn, awa.RawJob("hooked", {"fail": True}, queue="py_hooks", max_attempts=2)).id
    events: list[awa.JobEvent] = []
    failed: list[int] = []
    lock = threading.Lock()

    def hooked(args: dict) -> None:
        if args["fail"]:
            raise RuntimeError("told to fail")

    def every(event: awa.JobEvent) -> None:
        with lock:
            events.append(event)

    def raising(event: awa.JobEvent) -> None:
        raise ValueError("a broken hook does not stop the others")

    worker = (
        client.worker(queues={"py_hooks": 1})
        .register("hooked", hooked, retry=awa.FixedBackoff(0.1))
        .on_event(raising)
        .on_event(every)
        .on_failed(lambda e: failed.append(e.job_id))
    )
    with running(worker):
        wait_state(client, bad, "failed")
        wait_for("three events", lambda: len(events) >= 3)
    by_job = {}
    for e in events:
        by_job.setdefault(e.job_id, []).append((e.attempt, e.state))
    assert by_job[ok] == [(1, "completed")]
    assert by_job[bad] == [(1, "retryable"), (2, "failed")]
    assert all("told to fail" in (e.error or "") for e in events if e.job_id == bad), events
    assert failed == [bad]


def test_work_one_runs_one_job_in_process_and_says_how_it_went(db_url: str, client: awa.Client) -> None:
    calls: list[int] = []

    def handle(args: dict, ctx: awa.Context) -> None:
        calls.append(ctx.job_id)
        if args.get("retry"):
            raise awa.Retry("again")

    async def slow(args: dict) -> None:
        import asyncio

        await asyncio.sleep(3600)

    worker = (
        client.worker(queues={"py_unit": 1})
        .register("unit", handle)
        .register("unit_slow", slow, timeout=0.2)
    )
    assert awa.testing.work_one(worker, "py_unit") is None, "nothing runnable"
    with psycopg.connect(db_url) as conn:
        first = awa.enqueue(conn, awa.RawJob("unit", {}, queue="py_unit")).id
        second = awa.enqueue(conn, awa.RawJob("unit", {"retry": True}, queue="py_unit")).id
        third = awa.enqueue(conn, awa.RawJob("unit_slow", {}, queue="py_unit")).id
    done = awa.testing.work_one(worker, "py_unit")
    assert done is not None
    assert (done["job_id"], done["kind"], done["attempt"], done["accepted"], done["state"]) == (
        first,
        "unit",
        1,
        True,
        "completed",
    )
    again = awa.testing.work_one(worker, "py_unit")
    assert again is not None and (again["job_id"], again["state"]) == (second, "retryable")
    timed = awa.testing.work_one(worker, "py_unit")
    assert timed is not None and (timed["job_id"], timed["state"]) == (third, "retryable")
    assert client.get_job(third)["attempts"][0]["error"].startswith("timeout:")
    assert calls == [first, second]
    assert client.get_job(first)["state"] == "completed"
