"""Workers: Python handlers run by the Rust runtime (claims, batching,
heartbeats, retries, graceful shutdown and, by default, a maintenance
leader candidate), and the context each attempt sees."""

from __future__ import annotations

import asyncio
import inspect
import json
import queue
import signal
import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable, Mapping

from . import _awa
from ._context import Context
from ._jobs import args_of, from_args, spec_of, timeout_seconds, to_json
from ._middleware import Middleware, check, execute_chain, execute_chain_async, require_async
from ._outcomes import Fail, from_exception, from_result


@dataclass(frozen=True)
class FixedBackoff:
    """Retry a failed attempt after the same delay every time."""

    seconds: float

    def _tuple(self) -> tuple[str, float, float]:
        return ("fixed", float(self.seconds), 0.0)


@dataclass(frozen=True)
class ExponentialBackoff:
    """Retry after base, 2*base, 4*base ... at most max (25 % jitter)."""

    base: float
    max: float

    def _tuple(self) -> tuple[str, float, float]:
        return ("exponential", float(self.base), float(self.max))


@dataclass(frozen=True)
class JobEvent:
    """One attempt's result, given to lifecycle hooks once the write that
    recorded it has committed (a rejected or rolled-back result is never
    reported)."""

    job_id: int
    run_lease: int
    queue: str
    kind: str
    attempt: int
    """The attempt that ended (1 for the first run)."""
    state: str
    """Where the job went: completed, retryable, snoozed, cancelled,
    failed or dead_lettered."""
    error: str | None
    """The handler's error or cancel reason, when it gave one."""


def _takes_context(handler: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(handler).parameters.values()
    except (TypeError, ValueError):
        return True
    positional = [
        p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


class _SyncPool:
    """Daemon threads for sync handlers, started as needed and kept for
    the next job. Daemon Python threads, not Rust ones: a handler that
    never returns (given up at the cancel or shutdown grace) cannot keep
    the process from exiting, and the interpreter ends it at exit as it
    ends any daemon thread."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, call: Callable[[], None]) -> None:
        with self._lock:
            start = self._idle == 0
            if not start:
                self._idle -= 1
        self._calls.put(call)
        if start:
            threading.Thread(target=self._serve, name="awa-handler", daemon=True).start()

    def _serve(self) -> None:
        while True:
            call = self._calls.get()
            try:
                call()
            except BaseException:  # invoke never raises; keep the thread anyway
                pass
            del call
            with self._lock:
                self._idle += 1


_SYNC_POOL = _SyncPool()


class _Kind:
    """One registered kind: decodes args, calls the handler (inside the
    worker's middleware, when it has some), maps the result.
    `invoke(native, done)` never raises and returns at once: the outcome
    tuple reaches `done.set` (sync handlers, on `_SYNC_POOL`) or `done` as
    the done-callback of the returned future (async handlers, on the
    worker's loop)."""

    def __init__(
        self, job_type: type | None, handler: Callable[..., Any], middleware: list[Middleware]
    ) -> None:
        self.job_type = job_type
        self.handler = handler
        self.is_async = inspect.iscoroutinefunction(handler)
        self.with_context = _takes_context(handler)
        self.loop: asyncio.AbstractEventLoop | None = None
        # The worker's list, shared: middleware added later applies too.
        self.middleware = middleware

    def _arguments(self, ctx: Context) -> tuple[Any, ...]:
        job: Any = ctx.args
        if self.job_type is not None:
            try:
                job = from_args(self.job_type, ctx.args)
            except Exception as e:  # args that do not fit the type never will
                name = self.job_type.__name__
                raise Fail(f"the args of job kind {ctx.kind!r} do not match {name}: {e}") from None
        return (job, ctx) if self.with_context else (job,)

    def _handle(self, ctx: Context) -> Any:
        return self.handler(*self._arguments(ctx))

    async def _ahandle(self, ctx: Context) -> Any:
        return await self.handler(*self._arguments(ctx))

    def invoke(self, native: _awa.NativeContext, done: Any) -> None:
        _SYNC_POOL.submit(lambda: done.set(self._call(native)))

    def _call(self, native: _awa.NativeContext) -> tuple[str, float | None, str | None]:
        try:
            ctx = Context(native)
            if self.middleware:
                return from_result(execute_chain(self.middleware, self._handle)(ctx))
            return from_result(self._handle(ctx))
        except BaseException as e:
            return from_exception(e)

    def invoke_async(self, native: _awa.NativeContext, done: Any) -> Any:
        assert self.loop is not None, "async handlers need the worker's loop"
        future = asyncio.run_coroutine_threadsafe(self._run(native), self.loop)
        future.add_done_callback(done)
        return future

    async def _run(self, native: _awa.NativeContext) -> tuple[str, float | None, str | None]:
        try:
            ctx = Context(native)
            if self.middleware:
                return from_result(await execute_chain_async(self.middleware, self._ahandle)(ctx))
            return from_result(await self._ahandle(ctx))
        except BaseException as e:
            return from_exception(e)


# How long `Worker.run` waits for its asyncio loop to stop.
_LOOP_STOP_WAIT = 5.0


class Worker:
    """Serve queues with Python handlers on the Rust runtime.

        awa.Client(url).worker(queues={"email": 16}).register(SendEmail, send).run()

    `run()` blocks until SIGINT / SIGTERM (when called on the main thread)
    or `stop()`, then shuts down gracefully: no new claims, in-flight
    handlers get `shutdown_grace` seconds, unfinished ones are released
    to run again. A handler whose job is cancelled while it runs learns
    it at once (`ctx.is_cancelled()`, `ctx.wait_cancelled()`, `await
    ctx.cancelled()`) and is given up `cancel_grace` seconds later
    (default 5): an async handler's task is cancelled, a sync handler
    (which cannot be stopped) is abandoned, its result ignored; either
    way its slot is freed. A maintenance-leader candidate runs unless
    `maintenance=False` (then some other process must run one, or
    retries, scheduled jobs and rescues stop).
    """

    def __init__(
        self,
        url: str,
        queues: Mapping[str, int],
        *,
        maintenance: bool = True,
        shutdown_grace: float = 10.0,
        claim_batch: int | None = None,
        poll_interval: float | None = None,
        max_connections: int = 10,
        cancel_grace: float | None = None,
    ) -> None:
        if not queues:
            raise _awa.ValidationError("a worker needs at least one queue: queues={'name': concurrency}")
        self._native = _awa.NativeWorker(
            url,
            [(q, int(n)) for q, n in queues.items()],
            maintenance,
            float(shutdown_grace),
            claim_batch,
            poll_interval,
            max_connections,
            None if cancel_grace is None else float(cancel_grace),
        )
        self._kinds: list[_Kind] = []
        self._middleware: list[Middleware] = []

    def use(self, middleware: Middleware) -> "Worker":
        """Run every attempt inside `middleware` (an `awa.Middleware`),
        inside any added before (the first added is outermost; a client's
        come first). Its ``around_execute`` wraps sync handlers and
        ``around_execute_async`` async ones; one that overrides only the
        sync method cannot wrap an async handler (TypeError). How results
        and errors pass through: `awa.Middleware`."""
        m = check(middleware)
        if any(k.is_async for k in self._kinds):
            require_async([m], "around_execute", "an async handler")
        self._middleware.append(m)
        return self

    def register(
        self,
        job: type | str,
        handler: Callable[..., Any],
        *,
        retry: FixedBackoff | ExponentialBackoff | None = None,
        timeout: float | timedelta | None = None,
    ) -> "Worker":
        """Run `handler(job, ctx)` (or `handler(job)`) for jobs of `job`:
        a class decorated with @awa.job (the handler gets an instance), or
        a kind name (the handler gets the args dict). Sync handlers run on
        a thread pool, async ones on the worker's asyncio loop. `retry`
        sets the delay after a failed attempt (default: the database's
        exponential backoff). `timeout` (seconds or a timedelta) is the
        kind's default timeout, over the class's `@awa.job(timeout=...)`:
        at it an async handler's task is cancelled, a sync one is
        abandoned (its slot freed, a warning logged, `ctx.is_cancelled()`
        turns True, its result ignored), and the attempt fails with an
        error starting "timeout:", retried like any failure. A job's own
        timeout wins."""
        if isinstance(job, str):
            kind, job_type, default = job, None, None
        else:
            spec = spec_of(job)
            kind, job_type, default = spec.kind, job, spec.timeout
        secs = timeout_seconds(timeout)
        secs = default if secs is None else secs
        entry = _Kind(job_type, handler, self._middleware)
        if entry.is_async:
            require_async(self._middleware, "around_execute", "an async handler")
        invoke = entry.invoke_async if entry.is_async else entry.invoke
        self._native.register(kind, invoke, entry.is_async, None if retry is None else retry._tuple(), secs)
        self._kinds.append(entry)
        return self

    def cron(
        self,
        name: str,
        cron: str,
        job: Any,
        *,
        timezone: str = "UTC",
        catch_up: int | None = None,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> "Worker":
        """Declare a periodic job, as the Rust client's
        `ClientBuilder::cron`: every tick of `cron` (5 or 6 fields, or
        `@hourly`-style) in `timezone`, the maintenance leader enqueues
        `job` (a typed job instance or an awa.RawJob; its class's kind,
        queue, priority and max attempts unless given here) exactly once.
        Upserted when the worker starts (created, or changed to this
        definition); `catch_up=N` fires up to N ticks missed while no
        leader ran (default: only the latest). Raises
        awa.ValidationError at once for a bad schedule."""
        spec = spec_of(job)
        self._native.cron(
            name,
            cron,
            spec.queue if queue is None else queue,
            spec.kind,
            to_json("schedule args", args_of(job)),
            spec.priority if priority is None else priority,
            spec.max_attempts if max_attempts is None else max_attempts,
            None if metadata is None else to_json("schedule metadata", dict(metadata)),
            timezone,
            catch_up,
        )
        return self

    def prune_schedules(self) -> "Worker":
        """At start, delete every schedule in the database this worker
        does not declare with `cron` (the code is the source of truth)."""
        self._native.prune_schedules()
        return self

    def on_event(self, hook: Callable[[JobEvent], Any]) -> "Worker":
        """Call `hook(event)` (an awa.JobEvent) after every result commits
        (completed, retried, snoozed, cancelled, failed, dead-lettered),
        once, in commit order, on the worker's hook thread: a slow hook
        delays other hooks, never the jobs. An exception is logged and the
        next event still comes. Not called by `awa.testing.work_one`."""
        if not callable(hook):
            raise TypeError(f"a hook must be callable, not {type(hook).__name__}")
        self._native.on_event(lambda *fields: hook(JobEvent(*fields)))
        return self

    def on_completed(self, hook: Callable[[JobEvent], Any]) -> "Worker":
        """Call `hook(event)` after each completion commits."""
        return self._on_state("completed", hook)

    def on_failed(self, hook: Callable[[JobEvent], Any]) -> "Worker":
        """Call `hook(event)` after each job fails for good (attempts used
        up, or a permanent error) without going to the dead-letter queue."""
        return self._on_state("failed", hook)

    def on_dead_lettered(self, hook: Callable[[JobEvent], Any]) -> "Worker":
        """Call `hook(event)` after each job moves to the dead-letter queue."""
        return self._on_state("dead_lettered", hook)

    def _on_state(self, state: str, hook: Callable[[JobEvent], Any]) -> "Worker":
        if not callable(hook):
            raise TypeError(f"a hook must be callable, not {type(hook).__name__}")

        def filtered(event: JobEvent) -> None:
            if event.state == state:
                hook(event)

        return self.on_event(filtered)

    def _work_one(self, queue: str) -> dict[str, Any] | None:
        """See `awa.testing.work_one`."""
        needs_loop = any(k.is_async for k in self._kinds)
        loop = asyncio.new_event_loop() if needs_loop else None
        thread = None
        if loop is not None:
            thread = threading.Thread(target=loop.run_forever, name="awa-asyncio-test", daemon=True)
            thread.start()
            for k in self._kinds:
                k.loop = loop
        try:
            text = self._native.work_one(queue)
        finally:
            if loop is not None and thread is not None:
                loop.call_soon_threadsafe(loop.stop)
                thread.join(timeout=_LOOP_STOP_WAIT)
                if not thread.is_alive():
                    loop.close()
        return None if text is None else json.loads(text)

    def register_rust_noop(self, kind: str) -> "Worker":
        """Complete jobs of `kind` in Rust without calling Python (a
        baseline for benchmarks)."""
        self._native.register_noop(kind)
        return self

    def stop(self) -> None:
        """Ask the worker to shut down gracefully (from any thread)."""
        self._native.stop()

    def run(self) -> dict[str, int]:
        """Serve until stopped; returns the worker's counters."""
        needs_loop = any(k.is_async for k in self._kinds)
        loop = asyncio.new_event_loop() if needs_loop else None
        thread = None
        if loop is not None:
            thread = threading.Thread(target=loop.run_forever, name="awa-asyncio", daemon=True)
            thread.start()
            for k in self._kinds:
                k.loop = loop
        previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, lambda _s, _f: self.stop())
        try:
            return json.loads(self._native.run())
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if loop is not None and thread is not None:
                loop.call_soon_threadsafe(loop.stop)
                # A handler that never yields (given up at the shutdown
                # grace) keeps the loop busy: leave it to the interpreter's
                # exit, as any daemon thread, rather than wait for ever.
                thread.join(timeout=_LOOP_STOP_WAIT)
                if not thread.is_alive():
                    loop.close()

    async def run_async(self) -> dict[str, int]:
        """`run()` from async code: async handlers run on the calling
        loop; cancelling this (or SIGINT / SIGTERM on the main thread's
        loop) shuts the worker down gracefully."""
        loop = asyncio.get_running_loop()
        for k in self._kinds:
            k.loop = loop
        installed = []
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.add_signal_handler(sig, self.stop)
                    installed.append(sig)
                except (NotImplementedError, RuntimeError):
                    pass
        fut = loop.run_in_executor(None, self._native.run)
        try:
            return json.loads(await asyncio.shield(fut))
        except asyncio.CancelledError:
            self.stop()
            await fut
            raise
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
