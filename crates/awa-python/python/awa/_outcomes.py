"""How a handler says its attempt went, and how that becomes one of the
runtime's outcomes: complete / retry / retry-after / snooze / cancel /
fail.

A handler returns None (or ``awa.Complete()``) to complete, or returns
or raises one of ``RetryAfter``, ``Snooze``, ``Cancel``, ``Fail`` or
``Retry``. Any other exception is a retry with the default backoff (or
the kind's retry policy), its formatted traceback stored as the error.
"""

from __future__ import annotations

import traceback
from typing import Any

# Error text kept with an attempt: the Rust runtime stores at most 8 KiB
# (awa_core::bounds::MAX_ERROR_BYTES); a traceback's tail says most, so
# that is what is kept, under the limit so nothing else is cut.
MAX_ERROR_BYTES = 8 * 1024 - 64
TRUNCATED = "[traceback truncated: its last {n} bytes follow]\n"


class Outcome(Exception):
    """Base of the results a handler may return or raise."""

    def _tuple(self) -> tuple[str, float | None, str | None]:
        raise NotImplementedError


class Complete(Outcome):
    """The job is done (the same as returning None)."""

    def _tuple(self) -> tuple[str, float | None, str | None]:
        return ("complete", None, None)


class Retry(Outcome):
    """Retry with the default backoff (or the kind's retry policy)."""

    def __init__(self, error: str = "retry requested") -> None:
        super().__init__(error)
        self.error = error

    def _tuple(self) -> tuple[str, float | None, str | None]:
        return ("retry", None, self.error)


class RetryAfter(Outcome):
    """Retry after `seconds` (the attempt counts; until max attempts)."""

    def __init__(self, seconds: float, error: str = "retry requested") -> None:
        super().__init__(seconds, error)
        self.seconds = float(seconds)
        self.error = error

    def _tuple(self) -> tuple[str, float | None, str | None]:
        return ("retry_after", self.seconds, self.error)


class Snooze(Outcome):
    """Run again after `seconds`; this attempt does not count."""

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)
        self.seconds = float(seconds)

    def _tuple(self) -> tuple[str, float | None, str | None]:
        return ("snooze", self.seconds, None)


class Cancel(Outcome):
    """Stop for good: the job is cancelled, with `reason`."""

    def __init__(self, reason: str = "cancelled by its handler") -> None:
        super().__init__(reason)
        self.reason = reason

    def _tuple(self) -> tuple[str, float | None, str | None]:
        return ("cancel", None, self.reason)


class Fail(Outcome):
    """Do not retry: fail now (dead-lettered if the queue opted in)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def _tuple(self) -> tuple[str, float | None, str | None]:
        return ("fail", None, self.reason)


def bounded(text: str, limit: int = MAX_ERROR_BYTES) -> str:
    """`text` within `limit` UTF-8 bytes, keeping its tail."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    marker = TRUNCATED.format(n=0)
    room = limit - len(marker.encode()) - 8
    tail = raw[-room:].decode("utf-8", errors="ignore")
    return TRUNCATED.format(n=len(tail.encode())) + tail


def from_result(result: Any) -> tuple[str, float | None, str | None]:
    """The outcome tuple of what a handler returned."""
    if result is None:
        return ("complete", None, None)
    if isinstance(result, Outcome):
        return result._tuple()
    return (
        "fail",
        None,
        f"the handler returned {type(result).__name__!s}; return None or an awa outcome "
        "(awa.Snooze, awa.Cancel, awa.Fail, awa.RetryAfter, awa.Retry)",
    )


def from_exception(exc: BaseException) -> tuple[str, float | None, str | None]:
    """The outcome tuple of what a handler raised."""
    if isinstance(exc, Outcome):
        return exc._tuple()
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return ("retry", None, bounded(text))
