"""A worker process for test_signals.py: `python worker_process.py URL DIR
MODE`. Its handler writes DIR/started, sleeps, writes DIR/finished; the
worker's counters are printed as JSON when it stops."""

import asyncio
import json
import pathlib
import sys
import time

import awa

url, out, mode = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]


def slow(args: dict, ctx: awa.Context) -> None:
    (out / "started").write_text(str(ctx.job_id))
    time.sleep(1.5)
    (out / "finished").write_text(str(ctx.job_id))


async def slow_async(args: dict, ctx: awa.Context) -> None:
    (out / "started").write_text(str(ctx.job_id))
    await asyncio.sleep(1.5)
    (out / "finished").write_text(str(ctx.job_id))


worker = awa.Client(url).worker(queues={"py_signals": 2}, shutdown_grace=30)
worker.register("slow", slow_async if mode == "async" else slow)
if mode == "run_async":
    stats = asyncio.run(worker.run_async())
else:
    stats = worker.run()
print(json.dumps(stats), flush=True)
