"""awa.Unique: uniqueness by kind, queue, args or args fields over a
period, from the job class or per enqueue. The key is derived by the
database, so a Python job and the same job from the CLI (the Rust
producer) or raw SQL are one job; bad specs are refused before any SQL."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta

import psycopg
import pytest

import awa
from conftest import awa_cli


@awa.job("py_refresh", queue="py_unique", unique=awa.Unique(by_args=True, period=600))
@dataclass
class Refresh:
    account: int


@awa.job(
    "py_sync",
    queue="py_unique",
    unique=awa.Unique(fields=("tenant",), by_queue=True, period=timedelta(hours=1), states=("completed", "failed")),
)
@dataclass
class Sync:
    tenant: str
    page: int


def test_a_duplicate_returns_the_existing_job(db_url: str) -> None:
    with psycopg.connect(db_url) as conn:
        first = awa.enqueue(conn, Refresh(account=1))
        again = awa.enqueue(conn, Refresh(account=1))
        other = awa.enqueue(conn, Refresh(account=2))
        many = awa.enqueue_many(conn, [Refresh(account=2), Refresh(account=3), Refresh(account=3)])
        s1 = awa.enqueue(conn, Sync(tenant="acme", page=1))
        s2 = awa.enqueue(conn, Sync(tenant="acme", page=2))
        elsewhere = awa.enqueue(conn, Sync(tenant="acme", page=3), queue="py_unique_2")
        # Per enqueue, over the class's (none for a RawJob).
        raw = awa.RawJob("py_nightly", {"day": 1}, queue="py_unique")
        by_kind = awa.Unique()
        n1 = awa.enqueue(conn, raw, unique=by_kind)
        n2 = awa.enqueue(conn, awa.RawJob("py_nightly", {"day": 2}, queue="py_unique"), unique=by_kind)
        plain = awa.enqueue(conn, awa.RawJob("py_nightly", {"day": 3}, queue="py_unique"))
        with_opts = awa.enqueue_many(
            conn,
            [awa.WithOptions(awa.RawJob("py_opts", {"a": 1}), unique=awa.Unique(by_args=True))] * 2,
            queue="py_unique",
        )
    assert first.inserted and other.inserted and not again.inserted and again.id == first.id
    assert (many[0].id, many[0].inserted) == (other.id, False)
    assert many[1].inserted and (many[2].id, many[2].inserted) == (many[1].id, False)
    assert s1.inserted and (s2.id, s2.inserted) == (s1.id, False)
    assert elsewhere.inserted, "the queue is part of Sync's key"
    assert n1.inserted and (n2.id, n2.inserted) == (n1.id, False)
    assert plain.inserted
    assert with_opts[0].inserted and (with_opts[1].id, with_opts[1].inserted) == (with_opts[0].id, False)


def test_python_the_cli_and_raw_sql_derive_one_key(db_url: str) -> None:
    with psycopg.connect(db_url) as conn:
        mine = awa.enqueue(conn, Refresh(account=77))
    # The CLI (the Rust producer), the same args written differently.
    cli = awa_cli(
        db_url,
        "job", "enqueue", "--queue", "py_unique", "--kind", "py_refresh",
        "--args", '{ "account" : 77 }', "--unique-by", "args", "--unique-period", "10m", "--json",
        check=False,
    )
    assert cli.returncode == 3, cli.stderr
    assert json.loads(cli.stdout)["held_by"] == mine.id
    # Raw SQL with the spec the Python client sends.
    spec = Refresh.__awa_job__.unique.to_json()
    assert json.loads(spec) == {"by": ["args"], "period": 600, "states": ["completed"]}
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT job_id, inserted FROM awa.enqueue(ARRAY['py_unique'], ARRAY['py_refresh'], "
            "ARRAY['{\"account\": 77}'::jsonb], ARRAY[2::smallint], ARRAY[NULL::timestamptz], "
            "ARRAY[NULL::integer], ARRAY[NULL::text], ARRAY[NULL::jsonb], ARRAY[%s::jsonb])",
            (spec,),
        ).fetchone()
    assert row == (mine.id, False)


def test_a_completed_job_keeps_its_key_for_the_period(db_url: str, client: awa.Client) -> None:
    from conftest import running, wait_state

    with psycopg.connect(db_url) as conn:
        done = awa.enqueue(conn, Refresh(account=5), queue="py_unique_run")
    worker = client.worker(queues={"py_unique_run": 2}).register(Refresh, lambda job, ctx: None)
    with running(worker):
        wait_state(client, done.id, "completed")
    with psycopg.connect(db_url) as conn:
        again = awa.enqueue(conn, Refresh(account=5), queue="py_unique_run")
    assert (again.id, again.inserted) == (done.id, False)


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda: awa.Unique(by_args="yes"), "by_args must be True or False"),
        (lambda: awa.Unique(fields="tenant"), "list of names"),
        (lambda: awa.Unique(fields=("",)), "1 to 255 bytes"),
        (lambda: awa.Unique(period=0), "unique period"),
        (lambda: awa.Unique(period=1.5), "whole seconds"),
        (lambda: awa.Unique(period=-5), "whole seconds"),
        (lambda: awa.Unique(period=timedelta(days=400)), "unique period"),
        (lambda: awa.Unique(period="10m"), "seconds or a timedelta"),
        (lambda: awa.Unique(period=60, states=("running",)), "unfinished jobs always hold"),
        (lambda: awa.Unique(period=60, states=("bogus",)), "unknown job state"),
        (lambda: awa.Unique(states=("completed",)), "needs a period"),
    ],
)
def test_bad_specs_are_refused_where_they_are_written(make, says: str) -> None:
    with pytest.raises(awa.ValidationError, match=says):
        make()


def test_a_unique_option_that_is_not_a_spec_is_refused(db_url: str) -> None:
    with pytest.raises(awa.ValidationError, match="awa.Unique"):
        awa.job("py_bad", unique={"by_args": True})  # type: ignore[arg-type]
    with psycopg.connect(db_url) as conn:
        with pytest.raises(awa.ValidationError, match="awa.Unique"):
            awa.enqueue(conn, Refresh(account=1), unique="args")  # type: ignore[arg-type]
