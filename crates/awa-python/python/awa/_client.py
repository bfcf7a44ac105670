"""`awa.Client`: one database's admin reads (job by id, queue stats, the
dead-letter queue), workers, and the typed-job decorator."""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Mapping, TypeVar

from . import _awa
from ._enqueue import enqueue, enqueue_many
from ._jobs import DEFAULT_PRIORITY, job
from ._worker import Worker

T = TypeVar("T")


class Client:
    """A handle on one Awa database, by URL (``postgres://...``).

    Producers need no client: ``awa.enqueue(conn, job)`` runs on the
    application's own connection. The client connects (a small pool) on
    first use of an admin method; workers open their own pool.
    """

    def __init__(self, url: str, *, default_queue: str | None = None) -> None:
        self.url = url
        self.default_queue = default_queue
        self._native: _awa.NativeClient | None = None

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
        """A worker for `queues` ({name: concurrency}); see `awa.Worker`."""
        return Worker(self.url, queues, **options)

    enqueue = staticmethod(enqueue)
    enqueue_many = staticmethod(enqueue_many)

    def get_job(self, job_id: int) -> dict[str, Any] | None:
        """One job (any state, from every plane) or None when unknown."""
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


def cli(args: Iterable[str]) -> int:
    """Run the `awa` command line (``awa.cli(["migrate"])``); its exit code."""
    return _awa.cli_main(["awa", *args])
