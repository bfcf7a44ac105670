"""Fixtures: a fresh, migrated database per test module on the server
`cargo xtask test` shares (DATABASE_URL), and helpers to run a worker
and wait for a job's state without timed assertions."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
import uuid
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

import awa

DEADLINE = 60.0


def server_url() -> str:
    url = os.environ.get("DATABASE_URL", "").strip()
    if not url:
        pytest.fail(
            "DATABASE_URL is not set: run the suite with `cargo xtask test`, or point "
            "DATABASE_URL at a PostgreSQL server where this user may CREATE DATABASE"
        )
    return url


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


def awa_cli(url: str, *args: str, check: bool = True, **kw: Any) -> subprocess.CompletedProcess[str]:
    """The `awa` command line in a child process: the binary AWA_BIN when
    set (`cargo xtask test` sets it), else `python -m awa` (the same CLI,
    from this package)."""
    binary = os.environ.get("AWA_BIN", "")
    program = [binary] if binary and os.path.exists(binary) else [sys.executable, "-m", "awa"]
    cmd = [*program, "--database-url", url, *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=DEADLINE, **kw)
    if check and done.returncode != 0:
        raise AssertionError(f"{args} exited {done.returncode}: {done.stderr}")
    return done


@pytest.fixture(scope="module")
def db_url() -> Iterator[str]:
    """A migrated database of its own for the test module."""
    base = server_url()
    name = f"awa_py_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = with_database(base, name)
    try:
        awa_cli(url, "migrate")
        yield url
    finally:
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def client(db_url: str) -> awa.Client:
    return awa.Client(db_url)


def wait_for(what: str, check: Callable[[], Any], deadline: float = DEADLINE) -> Any:
    """Poll `check` until it returns something truthy (then return it)."""
    end = time.monotonic() + deadline
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"gave up after {deadline:.0f} s waiting for {what}")
        time.sleep(0.05)


def wait_state(client: awa.Client, job_id: int, *states: str) -> dict[str, Any]:
    def check() -> Any:
        job = client.get_job(job_id)
        return job if job is not None and job["state"] in states else None

    return wait_for(f"job {job_id} to be {' or '.join(states)}", check)


@contextlib.contextmanager
def running(worker: awa.Worker) -> Iterator[dict[str, Any]]:
    """Run `worker` in a thread for the block; stop it (gracefully) after.
    Yields a dict that holds the worker's counters once it stopped."""
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["stats"] = worker.run()
        except BaseException as e:  # surfaced below
            out["error"] = e

    t = threading.Thread(target=target, name="test-worker")
    t.start()
    try:
        yield out
    finally:
        worker.stop()
        t.join(DEADLINE)
        assert not t.is_alive(), "the worker did not stop"
    if "error" in out:
        raise out["error"]
