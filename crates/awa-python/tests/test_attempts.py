"""Issue 22 from Python: every attempt of a job in `get_job` (number, times,
outcome, error, runtime), retry of a failed job from a queue without the
DLQ, and retry / cancel by selection with a dry run."""

from __future__ import annotations

import os
from datetime import datetime

import psycopg
import pytest

import awa
from conftest import running, wait_state


def enqueue(url: str, queue: str, kind: str, args: dict, **options: object) -> int:
    with psycopg.connect(url) as conn:
        return awa.enqueue(conn, awa.RawJob(kind, args, queue=queue), **options).id


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_three_failures_show_in_get_job_and_retry_brings_the_job_back(
    db_url: str, client: awa.Client
) -> None:
    job_id = enqueue(db_url, "py_three", "flaky", {"user": 42}, max_attempts=3)

    def flaky(args: dict, ctx: awa.Context) -> None:
        raise RuntimeError(f"failure number {ctx.attempt}")

    worker = client.worker(queues={"py_three": 1}).register(
        "flaky", flaky, retry=awa.FixedBackoff(0.1)
    )
    with running(worker):
        job = wait_state(client, job_id, "failed")
    attempts = job["attempts"]
    assert [a["attempt"] for a in attempts] == [1, 2, 3]
    assert [a["outcome"] for a in attempts] == ["retried", "retried", "failed"]
    for n, a in enumerate(attempts, start=1):
        assert f"failure number {n}" in a["error"]
        assert when(a["started_at"]) <= when(a["ended_at"])
        # The worker ran in this process.
        assert a["runtime"]["pid"] == os.getpid()
        assert a["runtime"]["host"] and a["runtime"]["id"]
    assert job["holder"] is None

    # The queue has no DLQ: retry puts the failure back as fresh work.
    done = client.retry(job_id)
    assert done is not None and done["retried"] == [job_id]
    assert client.get_job(job_id)["state"] == "available"
    assert client.retry(job_id) is None, "nothing is kept to retry any more"

    worker = client.worker(queues={"py_three": 1}).register("flaky", lambda args, ctx: None)
    with running(worker):
        job = wait_state(client, job_id, "completed")
    assert [a["outcome"] for a in job["attempts"]] == ["retried", "retried", "failed", "completed"]


def test_retry_and_cancel_by_selection_with_a_dry_run(db_url: str, client: awa.Client) -> None:
    ids = [
        enqueue(db_url, "py_bulk", kind, {"user": user}, max_attempts=1)
        for kind, user in [("a", 1), ("a", 2), ("b", 1)]
    ]

    def broken(args: dict, ctx: awa.Context) -> None:
        raise awa.Fail("no")

    worker = client.worker(queues={"py_bulk": 2})
    for kind in ("a", "b"):
        worker.register(kind, broken)
    with running(worker):
        for job_id in ids:
            wait_state(client, job_id, "failed")

    dry = client.retry_jobs("py_bulk", "failed", kind="a", dry_run=True)
    assert dry["matched"] == 2 and dry["retried"] == [] and dry["dry_run"]
    assert client.get_job(ids[0])["state"] == "failed"
    done = client.retry_jobs("py_bulk", "failed", args_contains={"user": 1})
    assert sorted(done["retried"]) == [ids[0], ids[2]]

    dry = client.cancel_jobs("py_bulk", dry_run=True)
    assert dry["matched"] == 2
    done = client.cancel_jobs("py_bulk", "available", kind="b")
    assert [(c["id"], c["cancelled_from"]) for c in done["cancelled"]] == [(ids[2], "available")]
    assert client.get_job(ids[2])["state"] == "cancelled"

    with pytest.raises(awa.ValidationError, match="failed or cancelled"):
        client.retry_jobs("py_bulk", "available")
    with pytest.raises(awa.ValidationError, match="unfinished"):
        client.cancel_jobs("py_bulk", "completed")
