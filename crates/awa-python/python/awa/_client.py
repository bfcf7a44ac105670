"""`awa.Client`: one database's admin reads (job by id with its attempts,
queue stats, the dead-letter queue), actions (cancel and retry, one job or
by selection), workers, and the typed-job decorator."""

from __future__ import annotations

import inspect
import json
from typing import Any, Callable, Iterable, Mapping, TypeVar

from . import _awa
from ._enqueue import _first, through
from ._jobs import DEFAULT_PRIORITY, job
from ._middleware import Middleware, check
from ._worker import Worker

T = TypeVar("T")


class Client:
    """A handle on one Awa database, by URL (``postgres://...``).

    Producers need no client: ``awa.enqueue(conn, job)`` runs on the
    application's own connection. ``client.enqueue(conn, job)`` is the
    same with the client's middleware around it (`awa.Middleware`), which
    also wraps every attempt of the workers it makes. The client connects
    (a small pool) on first use of an admin method; workers open their
    own pool.
    """

    def __init__(
        self,
        url: str,
        *,
        default_queue: str | None = None,
        middleware: Iterable[Middleware] = (),
    ) -> None:
        self.url = url
        self.default_queue = default_queue
        self._native: _awa.NativeClient | None = None
        self._middleware: list[Middleware] = [check(m) for m in middleware]

    def use(self, middleware: Middleware) -> "Client":
        """Add `middleware` inside any added before (the first added is
        outermost): around `client.enqueue` / `client.enqueue_many`, and
        around every attempt of the workers `client.worker` makes from
        now on, outside their own."""
        self._middleware.append(check(middleware))
        return self

    def __repr__(self) -> str:
        # The URL may carry a password: never show it.
        return "awa.Client(...)"

    def _admin(self) -> _awa.NativeClient:
        if self._native is None:
            self._native = _awa.NativeClient(self.url)
        return self._native

    def job(
        self,
        kind: str | None = None,
        *,
        queue: str | None = None,
        priority: int = DEFAULT_PRIORITY,
        max_attempts: int | None = None,
    ) -> Callable[[type[T]], type[T]]:
        """``@client.job("email")``: `awa.job`, with this client's
        default queue when none is given."""
        q = queue or self.default_queue or "default"
        return job(kind, queue=q, priority=priority, max_attempts=max_attempts)

    def worker(self, queues: Mapping[str, int], **options: Any) -> Worker:
        """A worker for `queues` ({name: concurrency}) with this client's
        middleware; see `awa.Worker`."""
        worker = Worker(self.url, queues, **options)
        for m in self._middleware:
            worker.use(m)
        return worker

    def enqueue(self, conn: Any, job: Any, **options: Any) -> Any:
        """`awa.enqueue` through this client's middleware."""
        result = through(self._middleware, conn, [job], options)
        if inspect.isawaitable(result):
            return _first(result)
        return result[0]

    def enqueue_many(self, conn: Any, jobs: Iterable[Any], **options: Any) -> Any:
        """`awa.enqueue_many` through this client's middleware: one
        `on_enqueue` call per call, with all its jobs."""
        return through(self._middleware, conn, jobs, options)

    def get_job(self, job_id: int) -> dict[str, Any] | None:
        """One job (any state, from every plane) or None when unknown.

        ``"attempts"`` lists every recorded attempt, oldest first: its
        ``attempt`` number, ``started_at``, ``ended_at``, ``outcome``
        (running, completed, retried, rescued, snoozed, released, failed,
        cancelled, dead_lettered), ``error`` and ``runtime`` (``id``,
        ``host``, ``pid``). A running job's ``"holder"`` names the runtime
        that holds it and its ``heartbeat_age_secs``."""
        text = self._admin().job_json(int(job_id))
        return None if text is None else json.loads(text)

    def queue_stats(self, queue: str | None = None) -> dict[str, dict[str, int]]:
        """Jobs per state, per queue (every queue with jobs, or one)."""
        return json.loads(self._admin().queue_stats_json(queue))

    def dlq_list(self, queue: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        """Dead-lettered jobs (with args and last error)."""
        return json.loads(self._admin().dlq_list_json(queue, limit))

    def dlq_retry(self, job_id: int | None = None, *, queue: str | None = None) -> dict[str, Any]:
        """Move one dead-lettered job (by id), or all (of `queue`), back
        to its queue as fresh work: ``{"retried": [ids], "kept": [...]}``
        (kept: its unique key is held by a newer unfinished job)."""
        return json.loads(self._admin().dlq_retry_json(job_id, queue))

    def cancel(self, job_id: int) -> str | None:
        """Cancel a job wherever it is; the state it was cancelled from,
        or None when unknown or already finished."""
        return self._admin().cancel(int(job_id))

    def retry(self, job_id: int) -> dict[str, Any] | None:
        """Put a failed or cancelled job back as fresh work (same id, its
        attempts start again, its history is kept), whether or not its
        queue dead-letters: ``{"matched", "retried", "kept", "dry_run"}``
        (``kept``: a newer unfinished job holds its unique key), or None
        when no failure of that job is kept."""
        text = self._admin().retry_json(int(job_id))
        return None if text is None else json.loads(text)

    def retry_jobs(
        self,
        queue: str,
        state: str,
        *,
        kind: str | None = None,
        args_contains: Mapping[str, Any] | list[Any] | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Put back every ``failed`` or ``cancelled`` (``state``) job of
        ``queue``, optionally only of ``kind`` and whose args contain
        ``args_contains`` (jsonb containment). With ``dry_run`` only
        ``matched`` is filled in and nothing changes."""
        return json.loads(
            self._admin().bulk_json(
                "retry", queue, state, kind, _json_or_none(args_contains), dry_run
            )
        )

    def cancel_jobs(
        self,
        queue: str,
        state: str | None = None,
        *,
        kind: str | None = None,
        args_contains: Mapping[str, Any] | list[Any] | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Cancel every unfinished job of ``queue`` (or only those in
        ``state``), optionally only of ``kind`` and whose args contain
        ``args_contains``: ``{"matched", "cancelled": [{"id",
        "cancelled_from"}], "dry_run"}``."""
        return json.loads(
            self._admin().bulk_json(
                "cancel", queue, state, kind, _json_or_none(args_contains), dry_run
            )
        )


def _json_or_none(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


def cli(args: Iterable[str]) -> int:
    """Run the `awa` command line (``awa.cli(["migrate"])``); its exit code."""
    return _awa.cli_main(["awa", *args])
