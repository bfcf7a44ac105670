"""No-op handler throughput: the Rust runtime with a Rust no-op handler,
then Python sync and async no-op handlers, one after another in this one
process against one database. `cargo xtask bench --scenario python` runs
it: `python noop_throughput.py URL JOBS CONCURRENCY`; prints one JSON
object. Each mode gets a queue of its own, filled before its worker
starts; the clock runs from the worker's start to its last completion
(polled every 20 ms, from the queue's exact counts)."""

from __future__ import annotations

import json
import sys
import threading
import time

import psycopg

import awa

url, jobs, concurrency = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
client = awa.Client(url)


def fill(queue: str) -> None:
    with psycopg.connect(url) as conn:
        for start in range(0, jobs, 5000):
            batch = [awa.RawJob("noop", {"i": i}, queue=queue) for i in range(start, min(jobs, start + 5000))]
            awa.enqueue_many(conn, batch)


def sync_noop(args: dict, ctx: awa.Context) -> None:
    return None


async def async_noop(args: dict, ctx: awa.Context) -> None:
    return None


def measure(mode: str) -> dict[str, float]:
    queue = f"bench_{mode}"
    fill(queue)
    worker = client.worker(queues={queue: concurrency}, shutdown_grace=30)
    if mode == "rust":
        worker.register_rust_noop("noop")
    else:
        worker.register("noop", async_noop if mode == "python_async" else sync_noop)
    out: dict[str, object] = {}
    thread = threading.Thread(target=lambda: out.update(stats=worker.run()))
    started = time.monotonic()
    thread.start()
    deadline = started + 600
    while True:
        done = client.queue_stats(queue).get(queue, {}).get("completed", 0)
        if done >= jobs or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    seconds = time.monotonic() - started
    worker.stop()
    thread.join()
    return {"jobs": done, "seconds": round(seconds, 3), "jobs_per_s": round(done / seconds, 1)}


results = {mode: measure(mode) for mode in ("rust", "python_sync", "python_async")}
print(json.dumps(results))
