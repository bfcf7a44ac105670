"""Enqueue joins the caller's transaction (psycopg sync and async,
SQLAlchemy), typed args round-trip, options apply, and bad jobs are
refused before any SQL."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import psycopg
import pydantic
import pytest

import awa
from conftest import running, wait_for, wait_state


@awa.job("py_enqueue_count", queue="py_enqueue")
@dataclass
class Count:
    n: int


class Order(pydantic.BaseModel):
    order_id: int
    items: list[str]
    placed_at: datetime


awa.job("py_order", queue="py_orders", priority=3, max_attempts=7)(Order)


def test_rollback_leaves_nothing_and_commit_runs_exactly_once(db_url: str, client: awa.Client) -> None:
    with psycopg.connect(db_url) as conn:
        rolled = awa.enqueue(conn, Count(n=1))
        conn.rollback()
    assert client.get_job(rolled.id) is None

    with psycopg.connect(db_url) as conn:
        with conn.transaction():
            done = awa.enqueue(conn, Count(n=2))
            # Not visible to anyone else before commit.
            assert client.get_job(done.id) is None
    assert done.inserted and not done.scheduled

    seen: list[int] = []
    lock = threading.Lock()

    def handle(job: Count, ctx: awa.Context) -> None:
        with lock:
            seen.append(job.n)

    worker = client.worker(queues={"py_enqueue": 4}).register(Count, handle)
    with running(worker) as out:
        wait_state(client, done.id, "completed")
    assert seen == [2], "the committed job ran exactly once; the rolled-back one never"
    assert out["stats"]["completed"] == 1
    assert client.queue_stats("py_enqueue")["py_enqueue"]["completed"] == 1


def test_typed_args_round_trip_with_options(db_url: str, client: awa.Client) -> None:
    placed = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    order = Order(order_id=7, items=["a", "ü"], placed_at=placed)
    with psycopg.connect(db_url) as conn:
        e = awa.enqueue(conn, order, metadata={"trace": "t-1"})
        later = awa.enqueue(conn, Count(n=3), run_at=timedelta(hours=1), queue="py_later")
        keyed = awa.enqueue(conn, Count(n=4), unique_key="only-one", queue="py_keyed")
        again = awa.enqueue(conn, Count(n=5), unique_key="only-one", queue="py_keyed")
    row = client.get_job(e.id)
    assert row["kind"] == "py_order" and row["queue"] == "py_orders"
    assert row["priority"] == 3 and row["max_attempts"] == 7
    assert row["metadata"] == {"trace": "t-1"}
    assert later.scheduled and client.get_job(later.id)["state"] == "scheduled"
    assert keyed.inserted and not again.inserted and again.id == keyed.id

    got: list[tuple[Order, object]] = []
    worker = client.worker(queues={"py_orders": 2}).register(
        Order, lambda job, ctx: got.append((job, ctx.metadata))
    )
    with running(worker):
        wait_state(client, e.id, "completed")
    assert got == [(order, {"trace": "t-1"})]
    assert got[0][0].placed_at == placed


def test_enqueue_many_on_a_cursor_in_order(db_url: str, client: awa.Client) -> None:
    with psycopg.connect(db_url) as conn, conn.cursor() as cur:
        done = awa.enqueue_many(
            cur,
            [Count(n=1), awa.WithOptions(Count(n=2), priority=4), awa.RawJob("raw_kind", {"x": 1})],
            queue="py_many",
        )
    assert [d.inserted for d in done] == [True, True, True]
    ids = [d.id for d in done]
    assert ids == sorted(ids)
    assert client.get_job(ids[1])["priority"] == 4
    assert client.get_job(ids[2])["kind"] == "raw_kind"
    assert client.get_job(ids[2])["args"] == {"x": 1}


def test_async_psycopg_commit_and_rollback(db_url: str, client: awa.Client) -> None:
    async def go() -> tuple[int, int]:
        async with await psycopg.AsyncConnection.connect(db_url) as conn:
            gone = await awa.enqueue(conn, Count(n=1))
            await conn.rollback()
            async with conn.transaction():
                kept = await awa.enqueue(conn, Count(n=2))
            many = await awa.enqueue_many(conn, [Count(n=3)])
            assert len(many) == 1
            return gone.id, kept.id

    gone, kept = asyncio.run(go())
    assert client.get_job(gone) is None
    assert client.get_job(kept)["state"] == "available"


def test_sqlalchemy_session_joins_its_transaction(db_url: str, client: awa.Client) -> None:
    import sqlalchemy
    from sqlalchemy.orm import Session

    import awa.sqlalchemy

    engine = sqlalchemy.create_engine(db_url.replace("postgres://", "postgresql+psycopg://", 1).replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with Session(engine) as session:
            gone = awa.sqlalchemy.enqueue(session, Count(n=1))
            session.rollback()
        with Session(engine) as session, session.begin():
            kept = awa.enqueue(session, Count(n=2), queue="py_sa")
        assert client.get_job(gone.id) is None
        assert client.get_job(kept.id)["queue"] == "py_sa"
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: awa.RawJob("k", {}, queue="bad queue!"), "queue"),
        (lambda: awa.RawJob("k", {}, priority=9), "priority"),
        (lambda: awa.RawJob("", {}), "kind"),
        (lambda: awa.RawJob("k", {"when": datetime.now()}), "JSON"),
        (lambda: awa.RawJob("k", {}, max_attempts=0), "max attempts"),
        (lambda: object(), "not a job"),
        # PostgreSQL cannot store a NUL in text or jsonb: refused here,
        # wherever it is, never a psycopg DataError from the server.
        (lambda: awa.RawJob("k", {"a": "x\x00y"}), "NUL"),
        (lambda: awa.RawJob("k", {"deep": [1, {"b": "\x00"}]}), "NUL"),
        (lambda: awa.RawJob("k", {"key\x00": 1}), "NUL"),
        (lambda: awa.RawJob("k\x00", {}), "kind"),
        (lambda: awa.RawJob("k", {}, queue="q\x00"), "queue"),
    ],
)
def test_bad_jobs_are_refused_before_sql(db_url: str, make, message: str) -> None:
    with psycopg.connect(db_url) as conn:
        with pytest.raises(awa.ValidationError, match=message):
            awa.enqueue(conn, make())
        # Nothing reached the server: the transaction is still usable.
        assert conn.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.parametrize(
    "options",
    [
        {"unique_key": "a\x00b"},
        {"metadata": {"m": "\x00"}},
        {"metadata": {"k\x00": 1}},
    ],
)
def test_a_nul_in_options_is_refused_before_sql(db_url: str, options: dict) -> None:
    with psycopg.connect(db_url) as conn:
        with pytest.raises(awa.ValidationError, match="NUL"):
            awa.enqueue(conn, Count(n=1), **options)
        with pytest.raises(awa.ValidationError, match="NUL"):
            awa.enqueue_many(conn, [Count(n=2), awa.WithOptions(Count(n=3), **options)])
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_bad_options_are_refused(db_url: str) -> None:
    with psycopg.connect(db_url) as conn:
        with pytest.raises(awa.ValidationError, match="naive"):
            awa.enqueue(conn, Count(n=1), run_at=datetime.now())
        with pytest.raises(awa.ValidationError, match="unique"):
            awa.enqueue(conn, Count(n=1), unique_key="")
        with pytest.raises(awa.ValidationError, match="queue"):
            awa.enqueue(conn, Count(n=1), queue="")
        with pytest.raises(awa.ValidationError, match="metadata"):
            awa.enqueue(conn, Count(n=1), metadata=["not", "a", "dict"])
        with pytest.raises(awa.ValidationError, match="priority"):
            awa.enqueue(conn, Count(n=1), priority=True)
    with pytest.raises(awa.ValidationError, match="priority"):
        awa.job("k", priority=0)
    with pytest.raises(TypeError, match="dataclass"):
        awa.job("k")(type("Plain", (), {}))


@pytest.mark.parametrize(
    "queues, args, priorities, sqlstate",
    [
        (["q", "q"], ['{}'], [2], "22023"),  # arrays differ in length
        (["q"], ['{"pad": "' + "x" * (1 << 20) + '"}'], [2], "54000"),  # over max_job_bytes
        (["q"], ['{}'], [9], "23514"),  # priority out of range
    ],
)
def test_the_sql_contracts_errors(db_url: str, queues, args, priorities, sqlstate: str) -> None:
    """docs/sql-producer.md's SQLSTATEs, called as any client would."""
    n = len(queues)
    with psycopg.connect(db_url) as conn:
        with pytest.raises(psycopg.Error) as raised:
            conn.execute(
                "SELECT * FROM awa.enqueue(%s::text[], %s::text[], %s::jsonb[], %s::smallint[], "
                "%s::timestamptz[], %s::integer[], %s::text[], %s::jsonb[])",
                (queues, ["k"] * n, args, priorities, [None] * n, [None] * n, [None] * n, [None] * n),
            )
        assert raised.value.sqlstate == sqlstate


@awa.job("py_prio", queue="py_prio")
@dataclass
class Prio:
    n: int


def test_priority_one_runs_first(db_url: str, client: awa.Client) -> None:
    """Mixed priorities from Python run 1 first, 4 last, in enqueue order
    within a priority (ADR 12; the old code ran 4,4,4,2,2,2,1,1,1)."""
    mixed = [4, 2, 1, 4, 2, 1, 4, 2, 1]
    assert Prio.__awa_job__.priority == 3, "the default"
    with psycopg.connect(db_url) as conn:
        awa.enqueue_many(conn, [awa.WithOptions(Prio(n=i), priority=p) for i, p in enumerate(mixed)])
    ran: list[tuple[int, int]] = []
    lock = threading.Lock()

    def handle(job, ctx: awa.Context) -> None:
        with lock:
            ran.append((ctx.priority, job.n))

    # One at a time, so the run order is the claim order.
    worker = client.worker(queues={"py_prio": 1}).register(Prio, handle)
    with running(worker):
        wait_for("every job to run", lambda: len(ran) == len(mixed) or None)
    assert ran == sorted((p, i) for i, p in enumerate(mixed))

