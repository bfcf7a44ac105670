"""Awa: a PostgreSQL-only job queue, for Python.

Enqueue inside your own transaction (psycopg 3 or SQLAlchemy) and run
Python handlers on Awa's Rust runtime::

    import awa

    @awa.job("send_email", queue="email")
    @dataclass
    class SendEmail:
        to: str

    with psycopg.connect(url) as conn:           # one transaction
        conn.execute("INSERT INTO users ...")
        awa.enqueue(conn, SendEmail(to="a@example.com"))

    def send(job: SendEmail, ctx: awa.Context) -> None: ...

    awa.Client(url).worker(queues={"email": 16}).register(SendEmail, send).run()

See docs/getting-started-python.md.
"""

from __future__ import annotations

from . import _awa, testing
from ._awa import AwaError, ValidationError
from ._client import Client, cli
from ._enqueue import Enqueued, WithOptions, enqueue, enqueue_many
from ._jobs import JobSpec, RawJob, Unique, job
from ._middleware import Middleware, Refused
from ._outcomes import Cancel, Complete, Fail, Outcome, Retry, RetryAfter, Snooze
from ._worker import Context, ExponentialBackoff, FixedBackoff, JobEvent, Worker

__version__ = _awa.__version__


def init_logging(filter: str = "awa=info") -> None:
    """Log the Rust runtime's events to stderr (quiet until called), with
    a tracing filter such as "awa=debug,sqlx=warn". Once per process."""
    _awa.init_logging(filter)


__all__ = [
    "AwaError",
    "Cancel",
    "Client",
    "Complete",
    "Context",
    "Enqueued",
    "ExponentialBackoff",
    "Fail",
    "FixedBackoff",
    "JobEvent",
    "JobSpec",
    "Middleware",
    "Outcome",
    "RawJob",
    "Refused",
    "Retry",
    "RetryAfter",
    "Snooze",
    "Unique",
    "ValidationError",
    "WithOptions",
    "Worker",
    "cli",
    "enqueue",
    "enqueue_many",
    "init_logging",
    "job",
    "testing",
]
