"""A worker process for test_signals.py: `python worker_process.py URL DIR
MODE [GRACE]`. Its handler writes DIR/started, sleeps, writes
DIR/finished; in the `busy` modes it never returns and never lets go of
the interpreter (a pure-Python loop: it gives the GIL up only when the
interpreter makes it). The worker's counters are printed as JSON when it
stops."""

import asyncio
import json
import pathlib
import sys
import time

import awa

url, out, mode = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]
grace = float(sys.argv[4]) if len(sys.argv) > 4 else 30.0


def slow(args: dict, ctx: awa.Context) -> None:
    (out / "started").write_text(str(ctx.job_id))
    time.sleep(1.5)
    (out / "finished").write_text(str(ctx.job_id))


async def slow_async(args: dict, ctx: awa.Context) -> None:
    (out / "started").write_text(str(ctx.job_id))
    await asyncio.sleep(1.5)
    (out / "finished").write_text(str(ctx.job_id))


def busy(args: dict, ctx: awa.Context) -> None:
    (out / "started").write_text(str(ctx.job_id))
    n = 0
    while True:
        n += 1


def busy_waiting(args: dict, ctx: awa.Context) -> None:
    # Deaf to the shutdown, but in and out of the native side all along
    # (each wait lets the GIL go and takes it back).
    (out / "started").write_text(str(ctx.job_id))
    while True:
        ctx.wait_cancelled(0.001)
        ctx.is_shutting_down()


async def busy_async(args: dict, ctx: awa.Context) -> None:
    (out / "started").write_text(str(ctx.job_id))
    n = 0
    while True:
        n += 1


handlers = {"async": slow_async, "busy": busy, "busy_waiting": busy_waiting, "busy_async": busy_async}
worker = awa.Client(url).worker(queues={"py_signals": 2}, shutdown_grace=grace)
worker.register("slow", handlers.get(mode, slow))
if mode == "run_async":
    stats = asyncio.run(worker.run_async())
else:
    stats = worker.run()
print(json.dumps(stats), flush=True)
