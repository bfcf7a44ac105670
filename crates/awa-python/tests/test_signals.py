"""SIGTERM and SIGINT shut a Python worker down gracefully: the
in-flight handler finishes, its result is recorded, the process exits 0."""

from __future__ import annotations

import json
import pathlib
import signal
import subprocess
import sys

import psycopg
import pytest

import awa
from conftest import DEADLINE, wait_for, wait_state

HERE = pathlib.Path(__file__).parent


@pytest.mark.parametrize(
    "sig, mode",
    [(signal.SIGTERM, "sync"), (signal.SIGINT, "sync"), (signal.SIGTERM, "async"), (signal.SIGTERM, "run_async")],
)
def test_a_signal_lets_the_in_flight_handler_finish(
    db_url: str, client: awa.Client, tmp_path: pathlib.Path, sig: signal.Signals, mode: str
) -> None:
    with psycopg.connect(db_url) as conn:
        job_id = awa.enqueue(conn, awa.RawJob("slow", {}, queue="py_signals")).id
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "worker_process.py"), db_url, str(tmp_path), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for("the handler to start", lambda: (tmp_path / "started").exists() or proc.poll() is not None)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert (tmp_path / "finished").read_text() == str(job_id), "the handler ran to its end"
    assert json.loads(out.strip().splitlines()[-1])["completed"] == 1
    wait_state(client, job_id, "completed")


@pytest.mark.parametrize("mode", ["busy", "busy_waiting", "busy_async"])
def test_a_handler_that_never_returns_does_not_crash_the_exit(
    db_url: str, client: awa.Client, tmp_path: pathlib.Path, mode: str
) -> None:
    """A handler busy in Python (holding the GIL whenever it can) when
    SIGTERM comes and past the shutdown grace: the worker gives it up,
    releases its job to run again, prints its counters and exits 0 (it
    used to die of `Fatal Python error: PyGILState_Release` and SIGABRT
    after the counters, a Rust thread still inside Python at exit)."""
    with psycopg.connect(db_url) as conn:
        job_id = awa.enqueue(conn, awa.RawJob("slow", {}, queue="py_signals")).id
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "worker_process.py"), db_url, str(tmp_path), mode, "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for("the handler to start", lambda: (tmp_path / "started").exists() or proc.poll() is not None)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Fatal Python error" not in err, err
    assert proc.returncode == 0, err
    stats = json.loads(out.strip().splitlines()[-1])
    assert stats["completed"] == 0
    assert not (tmp_path / "finished").exists()
    # Given up at the grace's end: released, not lost.
    wait_state(client, job_id, "available")
