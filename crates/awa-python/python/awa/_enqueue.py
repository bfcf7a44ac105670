"""Enqueue on the caller's own connection, so jobs commit or roll back
with the caller's transaction: psycopg 3 (sync and async connections and
cursors) and SQLAlchemy (sessions and connections, sync and async).

Everything goes through one statement, the SQL producer function
``awa.enqueue`` (docs/sql-producer.md); nothing here opens a connection
or commits. Jobs are checked (by the same Rust code the Rust client
uses) before any SQL is sent.
"""

from __future__ import annotations

import inspect
import re
from datetime import datetime, timedelta
from typing import Any, Iterable, Mapping, Sequence

from . import _awa
from ._jobs import Enqueued, Unique, WithOptions, args_of, run_at_text, spec_of, timeout_seconds, to_json
from ._middleware import Middleware, enqueue_chain, enqueue_chain_async

try:  # Trace context travels with the job when OpenTelemetry is installed.
    from opentelemetry import trace as _otel_trace
    from opentelemetry.trace.propagation.tracecontext import (
        TraceContextTextMapPropagator as _TraceContext,
    )
except ImportError:  # pragma: no cover - exercised without the package
    _otel_trace = None


# The statement, without its header (psycopg reads % in comments too).
SQL = "\n".join(
    line for line in _awa.ENQUEUE_SQL.splitlines() if not line.lstrip().startswith("--")
)
# The same with SQLAlchemy's named parameters.
SQLALCHEMY_SQL = re.sub(r"%\((\w+)\)s", r":\1", SQL)


def _row(job: Any, options: Mapping[str, Any]) -> tuple[Any, ...]:
    spec = spec_of(job)
    queue = options.get("queue")
    queue = spec.queue if queue is None else queue
    priority = options.get("priority")
    priority = spec.priority if priority is None else priority
    max_attempts = options.get("max_attempts")
    max_attempts = spec.max_attempts if max_attempts is None else max_attempts
    args = to_json("job args", args_of(job))
    metadata = options.get("metadata")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise _awa.ValidationError(
            f"metadata must be a dict (a JSON object), not {type(metadata).__name__}"
        )
    timeout = timeout_seconds(options.get("timeout"))
    if timeout is not None:
        # The job's own timeout travels in its metadata (whole ms).
        metadata = {**(metadata or {}), _awa.TIMEOUT_METADATA_KEY: _awa.job_timeout_ms(timeout)}
    metadata_json = None if metadata is None else to_json("job metadata", dict(metadata))
    unique_key = options.get("unique_key")
    unique = options.get("unique")
    unique = spec.unique if unique is None else unique
    if unique is not None and not isinstance(unique, Unique):
        raise _awa.ValidationError(f"unique must be an awa.Unique(...), not {unique!r}")
    for name, value, kind in (
        ("priority", priority, int),
        ("max_attempts", max_attempts, (int, type(None))),
        ("unique_key", unique_key, (str, type(None))),
    ):
        if isinstance(value, bool) or not isinstance(value, kind):
            raise _awa.ValidationError(f"{name} has the wrong type: {value!r}")
    _awa.validate_job(queue, spec.kind, args, priority, max_attempts, unique_key, metadata_json)
    return (
        queue,
        spec.kind,
        args,
        str(priority),
        run_at_text(options.get("run_at")),
        None if max_attempts is None else str(max_attempts),
        unique_key,
        metadata_json,
        None if unique is None else unique.to_json(),
    )


def params(items: Iterable[Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """The statement's parameters for `items` (jobs or WithOptions)."""
    names = (
        "queues",
        "kinds",
        "args",
        "priorities",
        "run_at",
        "max_attempts",
        "unique_keys",
        "metadata",
        "unique",
    )
    columns: dict[str, Any] = {n: [] for n in names}
    for item in items:
        if isinstance(item, WithOptions):
            merged = {**options, **{k: v for k, v in item.options.items() if v is not None}}
            row = _row(item.job, merged)
        else:
            row = _row(item, options)
        for name, value in zip(names, row):
            columns[name].append(value)
    # No key spec at all: NULL, the SQL's cheapest test.
    if all(u is None for u in columns["unique"]):
        columns["unique"] = None
    columns["traceparent"], columns["tracestate"] = trace_context()
    return columns


def trace_context() -> tuple[str | None, str | None]:
    """The W3C traceparent and tracestate of the current OpenTelemetry
    span, or (None, None): when `opentelemetry` is not importable or no
    valid span is current. awa.enqueue stores them in each job's metadata
    ("awa_trace"), where the worker's span finds its parent."""
    if _otel_trace is None:
        return None, None
    if not _otel_trace.get_current_span().get_span_context().is_valid:
        return None, None
    carrier: dict[str, str] = {}
    _TraceContext().inject(carrier)
    return carrier.get("traceparent"), carrier.get("tracestate") or None


def _rows(rows: Sequence[Any]) -> list[Enqueued]:
    out = []
    for r in rows:
        if isinstance(r, Mapping):  # a dict_row cursor
            r = (r["job_id"], r["inserted"], r["scheduled"])
        out.append(Enqueued(int(r[0]), bool(r[1]), bool(r[2])))
    return out


def _is_sqlalchemy(conn: Any) -> bool:
    return type(conn).__module__.split(".")[0] == "sqlalchemy"


def _is_async(conn: Any) -> bool:
    return inspect.iscoroutinefunction(getattr(type(conn), "execute", None))


def enqueue_many(conn: Any, jobs: Iterable[Any], **options: Any) -> Any:
    """Enqueue `jobs` (typed jobs, RawJob or WithOptions) in one round
    trip on `conn`: a psycopg 3 connection or cursor, or a SQLAlchemy
    session or connection. `options` (queue, priority, run_at,
    max_attempts, unique_key, metadata, unique, timeout) apply to every job unless a
    WithOptions says otherwise. Returns one Enqueued per job, in order;
    on an async connection or session, an awaitable of that list.

    Nothing is committed: the jobs exist exactly when the caller's
    transaction commits. A job refused by the checks raises
    awa.ValidationError before any SQL is sent.
    """
    p = params(jobs, options)
    if _is_sqlalchemy(conn):
        return _execute_sqlalchemy(conn, p)
    if _is_async(conn):
        return _execute_async(conn, p)
    if not p["kinds"]:
        return []
    cur = conn.execute(SQL, p)
    return _rows(cur.fetchall())


def _execute_sqlalchemy(conn: Any, p: dict[str, list[Any]]) -> Any:
    # Here rather than in awa.sqlalchemy, which re-exports enqueue and
    # enqueue_many: the helper stands below its public face. SQLAlchemy is
    # imported only when a session or connection of its own arrives.
    from sqlalchemy import text

    if not p["kinds"]:
        if _is_async(conn):
            return _empty()
        return []
    result = conn.execute(text(SQLALCHEMY_SQL), p)
    if inspect.isawaitable(result):
        return _fetch_async(result)
    return _rows(result.fetchall())


async def _fetch_async(result: Any) -> list[Enqueued]:
    return _rows((await result).fetchall())


async def _empty() -> list[Enqueued]:
    return []


async def _execute_async(conn: Any, p: dict[str, list[Any]]) -> list[Enqueued]:
    if not p["kinds"]:
        return []
    cur = await conn.execute(SQL, p)
    return _rows(await cur.fetchall())


def enqueue(
    conn: Any,
    job: Any,
    *,
    queue: str | None = None,
    priority: int | None = None,
    run_at: datetime | timedelta | None = None,
    max_attempts: int | None = None,
    unique_key: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    unique: Unique | None = None,
    timeout: float | timedelta | None = None,
) -> Any:
    """Enqueue one job on `conn` (see `enqueue_many`); returns its
    Enqueued (an awaitable of it on an async connection). `unique` (an
    awa.Unique) overrides the job class's. `timeout` (seconds or a
    timedelta) is this job's own timeout, over its kind's: stored in its
    metadata as awa_timeout_ms."""
    result = enqueue_many(
        conn,
        [job],
        queue=queue,
        priority=priority,
        run_at=run_at,
        max_attempts=max_attempts,
        unique_key=unique_key,
        metadata=metadata,
        unique=unique,
        timeout=timeout,
    )
    if inspect.isawaitable(result):
        return _first(result)
    return result[0]


async def _first(result: Any) -> Enqueued:
    return (await result)[0]


def through(layers: Sequence[Middleware], conn: Any, jobs: Iterable[Any], options: Mapping[str, Any]) -> Any:
    """`enqueue_many(conn, jobs, **options)` with enqueue middleware
    `layers` around it (outermost first), each job as a WithOptions with
    the call's options merged in. Without layers, `enqueue_many` itself."""
    if not layers:
        return enqueue_many(conn, jobs, **options)
    unknown = set(options) - set(WithOptions(None).options)
    if unknown:
        raise TypeError(f"unknown enqueue options: {', '.join(sorted(unknown))}")
    items = []
    for job in jobs:
        own = job.options if isinstance(job, WithOptions) else {}
        merged = WithOptions(job.job if isinstance(job, WithOptions) else job)
        merged.options.update({k: v for k, v in options.items() if v is not None})
        merged.options.update({k: v for k, v in own.items() if v is not None})
        if isinstance(merged.metadata, Mapping):
            merged.metadata = dict(merged.metadata)  # the middleware's to change
        items.append(merged)
    if _is_async(conn):
        return enqueue_chain_async(layers, lambda js: _awaitable(enqueue_many(conn, js)))(items)
    return enqueue_chain(layers, lambda js: enqueue_many(conn, js))(items)


async def _awaitable(result: Any) -> list[Enqueued]:
    return await result
