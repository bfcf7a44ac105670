"""Middleware: code of yours around every enqueue of a client and every
attempt of a worker (tenant context, logging, metrics, authorization),
as the Rust client's `awa::Middleware` (docs/adr/0015).

Order: the first added is outermost. It runs first on the way in and last
on the way out, for enqueue and execution alike. Nothing here runs for a
client or worker without middleware.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Sequence

from . import _awa
from ._context import Context
from ._jobs import Enqueued, WithOptions

EnqueueNext = Callable[[list["WithOptions"]], list["Enqueued"]]
AsyncEnqueueNext = Callable[[list["WithOptions"]], Awaitable[list["Enqueued"]]]
ExecuteNext = Callable[["Context"], Any]
AsyncExecuteNext = Callable[["Context"], Awaitable[Any]]


class Refused(_awa.AwaError):
    """An enqueue that middleware refused: nothing was written."""


class Middleware:
    """Subclass and override what you need; every method's default passes
    the work on unchanged. Add it with ``awa.Client(url, middleware=[...])``
    or ``client.use(m)`` (its enqueues, and every worker it makes) or
    ``worker.use(m)`` (that worker's attempts).

    Each method gets the work and ``call_next``: call it to go on (the
    inner middleware, then the insert or the handler), or do not, to
    refuse. Sync and async twins: ``on_enqueue`` wraps enqueues on sync
    connections and ``on_enqueue_async`` on async ones;
    ``around_execute`` wraps sync handlers and ``around_execute_async``
    async ones. A middleware that overrides only the sync method of a pair
    is refused where the async one is needed (a TypeError, before anything
    is written or run) rather than silently skipped: a check it makes must
    not be bypassed by an async connection or handler.

    Enqueue: ``jobs`` is a list of ``awa.WithOptions`` (every option of the
    call merged in); change them (``job.metadata = {...}``), raise to
    refuse (``awa.Refused`` is meant for it: nothing is written, the
    caller gets the exception, its transaction goes on), or look at the
    results. Return one ``awa.Enqueued`` per job, in order.

    Execution: ``call_next(ctx)`` runs the handler and returns what it
    returned (None, or an awa outcome such as ``awa.Snooze``) or raises
    what it raised. What the outermost middleware returns or raises is the
    attempt's result, exactly as if a handler had: any exception other than
    an awa outcome fails the attempt, which is retried with the kind's
    retry policy (the policy sits outside every middleware) until its
    attempts are used up. A middleware that does not call ``call_next``
    keeps the handler from running, and its own return value is the
    result. Timeouts and cancels stop the whole chain (an async one's
    task is cancelled: ``asyncio.CancelledError`` passes through it).
    """

    def on_enqueue(self, jobs: list[WithOptions], call_next: EnqueueNext) -> list[Enqueued]:
        return call_next(jobs)

    async def on_enqueue_async(
        self, jobs: list[WithOptions], call_next: AsyncEnqueueNext
    ) -> list[Enqueued]:
        return await call_next(jobs)

    def around_execute(self, ctx: Context, call_next: ExecuteNext) -> Any:
        return call_next(ctx)

    async def around_execute_async(self, ctx: Context, call_next: AsyncExecuteNext) -> Any:
        return await call_next(ctx)


def _overrides(m: Middleware, name: str) -> bool:
    return getattr(type(m), name, None) is not getattr(Middleware, name)


def check(m: Any) -> Middleware:
    """`m` if it is a Middleware, else a TypeError."""
    if not isinstance(m, Middleware):
        raise TypeError(f"middleware must subclass awa.Middleware, not {type(m).__name__}")
    return m


def require_async(layers: Sequence[Middleware], sync: str, what: str) -> None:
    """Refuse layers that override the sync method `sync` but not its
    async twin, where `what` needs the async one."""
    for m in layers:
        if _overrides(m, sync) and not _overrides(m, sync + "_async"):
            raise TypeError(
                f"{type(m).__name__} overrides {sync} but not {sync}_async, which {what} "
                f"needs; define {sync}_async too"
            )


def _counted(m: Middleware, jobs: Sequence[Any], results: Any) -> list[Enqueued]:
    if not isinstance(results, list) or len(results) != len(jobs):
        n = len(results) if isinstance(results, list) else type(results).__name__
        raise _awa.AwaError(
            f"enqueue middleware {type(m).__name__} returned {n} results for {len(jobs)} jobs"
        )
    return results


def enqueue_chain(layers: Sequence[Middleware], write: EnqueueNext) -> EnqueueNext:
    """`write` (the insert) with `layers` around it, outermost first."""
    call = write
    for m in reversed(layers):

        def call_m(jobs: list[WithOptions], m: Middleware = m, inner: EnqueueNext = call) -> list[Enqueued]:
            return _counted(m, jobs, m.on_enqueue(list(jobs), inner))

        call = call_m
    return call


def enqueue_chain_async(layers: Sequence[Middleware], write: AsyncEnqueueNext) -> AsyncEnqueueNext:
    """`enqueue_chain` for async connections."""
    require_async(layers, "on_enqueue", "an enqueue on an async connection")
    call = write
    for m in reversed(layers):

        async def call_m(
            jobs: list[WithOptions], m: Middleware = m, inner: AsyncEnqueueNext = call
        ) -> list[Enqueued]:
            return _counted(m, jobs, await m.on_enqueue_async(list(jobs), inner))

        call = call_m
    return call


def execute_chain(layers: Sequence[Middleware], handler: ExecuteNext) -> ExecuteNext:
    """`handler` with `layers` around it, outermost first."""
    call = handler
    for m in reversed(layers):

        def call_m(ctx: Context, m: Middleware = m, inner: ExecuteNext = call) -> Any:
            return m.around_execute(ctx, inner)

        call = call_m
    return call


def execute_chain_async(layers: Sequence[Middleware], handler: AsyncExecuteNext) -> AsyncExecuteNext:
    """`execute_chain` for async handlers."""
    call = handler
    for m in reversed(layers):

        async def call_m(ctx: Context, m: Middleware = m, inner: AsyncExecuteNext = call) -> Any:
            return await m.around_execute_async(ctx, inner)

        call = call_m
    return call
