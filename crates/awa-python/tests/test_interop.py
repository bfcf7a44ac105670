"""Rust and Python meet in the database: a job enqueued by the Rust
producer (the `awa` command line, here as `python -m awa`, which is the
Rust CLI) runs on a Python worker, and a job enqueued from Python runs on
a Rust worker (`awa worker run` with its built-in no-op handler)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import psycopg

import awa
from conftest import awa_cli, running, wait_state


@awa.job("interop_greet", queue="py_interop")
@dataclass
class Greet:
    name: str
    times: int


def test_a_rust_producers_job_runs_on_a_python_worker(db_url: str, client: awa.Client) -> None:
    done = awa_cli(
        db_url, "--json", "job", "enqueue", "--queue", "py_interop", "--kind", "interop_greet",
        "--args", json.dumps({"name": "rust", "times": 2}), "--priority", "3",
    )
    [job_id] = json.loads(done.stdout)["ids"]
    got: list[Greet] = []
    worker = client.worker(queues={"py_interop": 1}).register(Greet, lambda job: got.append(job))
    with running(worker):
        wait_state(client, job_id, "completed")
    assert got == [Greet(name="rust", times=2)]


def test_a_python_producers_job_runs_on_a_rust_worker(db_url: str, client: awa.Client) -> None:
    with psycopg.connect(db_url) as conn:
        job_id = awa.enqueue(conn, Greet(name="py", times=1), queue="py_to_rust").id
    awa_cli(db_url, "worker", "run", "--queue", "py_to_rust", "--handler", "noop", "--exit-when-idle")
    job = wait_state(client, job_id, "completed")
    assert job["kind"] == "interop_greet" and job["args"] == {"name": "py", "times": 1}
