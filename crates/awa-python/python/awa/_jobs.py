"""Typed jobs: a kind and defaults attached to a dataclass or pydantic
model, how a job becomes JSON args, how args become the job again, and
the values an enqueue takes (WithOptions) and gives back (Enqueued)."""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterable, Mapping, NamedTuple, TypeVar, overload

from . import _awa
from ._awa import ValidationError

T = TypeVar("T")

DEFAULT_QUEUE = "default"
# Priority 1 runs first, 4 last; the default is the Rust client's (3).
DEFAULT_PRIORITY: int = _awa.DEFAULT_PRIORITY


@dataclass(frozen=True)
class Unique:
    """Uniqueness said the way you think: a job is unique by its kind plus
    any of its queue (``by_queue``), its whole args (``by_args``) or named
    top-level fields of its args (``fields``), optionally once per window
    of ``period`` (seconds or a timedelta; windows aligned to the Unix
    epoch, by the enqueueing transaction's start), and optionally still
    after it finished in ``states`` ("completed", "failed" - also
    dead-lettered -, "cancelled") until its window ends. Default states:
    ("completed",) with a period, none without. Unfinished jobs always
    hold their key. A duplicate enqueue inserts nothing and returns the
    existing job's id with ``inserted=False``::

        @awa.job(unique=awa.Unique(by_args=True, period=600))  # one per args per 10 min
        @dataclass
        class Refresh:
            account: int

    The key is derived in the database (``awa.enqueue``), the same way
    for the Rust client and raw SQL. Raises ``awa.ValidationError`` at
    once for a bad spec.
    """

    by_args: bool = False
    by_queue: bool = False
    fields: tuple[str, ...] = ()
    period: float | timedelta | None = None
    states: tuple[str, ...] | None = None
    _json: str = field(init=False, repr=False, compare=False, default="")

    def __post_init__(self) -> None:
        for name in ("by_args", "by_queue"):
            if not isinstance(getattr(self, name), bool):
                raise ValidationError(f"Unique.{name} must be True or False")
        fields = _names("fields", self.fields)
        states = None if self.states is None else _names("states", self.states)
        period = self.period
        if isinstance(period, timedelta):
            secs: float | None = period.total_seconds()
        elif period is None:
            secs = None
        elif isinstance(period, (int, float)) and not isinstance(period, bool):
            secs = float(period)
        else:
            raise ValidationError(
                f"Unique.period must be seconds or a timedelta, not {type(period).__name__}"
            )
        object.__setattr__(self, "fields", fields)
        object.__setattr__(self, "states", states)
        spec = _awa.unique_spec(self.by_queue, self.by_args, list(fields), secs, _list(states))
        object.__setattr__(self, "_json", spec)

    def to_json(self) -> str:
        """The spec as ``awa.enqueue`` takes it (docs/sql-producer.md)."""
        return self._json


def _names(what: str, value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise ValidationError(f"Unique.{what} must be a list of names, e.g. ('tenant',)")
    return tuple(value)


def _list(value: tuple[str, ...] | None) -> list[str] | None:
    return None if value is None else list(value)


@dataclass(frozen=True)
class JobSpec:
    """What `awa.job` attaches to a class (as `__awa_job__`)."""

    kind: str
    queue: str = DEFAULT_QUEUE
    priority: int = DEFAULT_PRIORITY
    max_attempts: int | None = None
    unique: Unique | None = None
    timeout: float | None = None
    """The kind's default timeout in seconds, applied by workers that
    register the class (`Worker.register`)."""


def timeout_seconds(value: Any) -> float | None:
    """A timeout given as seconds or a timedelta, checked (1 ms to 7
    days); None stays None."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        secs = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        secs = float(value)
    else:
        raise ValidationError(f"timeout must be seconds or a timedelta, not {type(value).__name__}")
    _awa.job_timeout_ms(secs)
    return secs


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def _is_pydantic(cls: type) -> bool:
    return hasattr(cls, "model_validate") and hasattr(cls, "model_dump")


def _check_spec(spec: JobSpec) -> None:
    _awa.validate_job(spec.queue, spec.kind, "{}", spec.priority, spec.max_attempts)
    if spec.unique is not None and not isinstance(spec.unique, Unique):
        raise ValidationError(
            f"unique must be an awa.Unique(...), not {type(spec.unique).__name__}"
        )


@overload
def job(kind: type[T], /) -> type[T]: ...
@overload
def job(
    kind: str | None = None,
    *,
    queue: str = DEFAULT_QUEUE,
    priority: int = DEFAULT_PRIORITY,
    max_attempts: int | None = None,
    unique: Unique | None = None,
    timeout: float | timedelta | None = None,
) -> Callable[[type[T]], type[T]]: ...
def job(
    kind: Any = None,
    *,
    queue: str = DEFAULT_QUEUE,
    priority: int = DEFAULT_PRIORITY,
    max_attempts: int | None = None,
    unique: Unique | None = None,
    timeout: float | timedelta | None = None,
) -> Any:
    """Map a dataclass or pydantic model to a job kind, with its default
    queue, priority (1 runs first, 4 last; default 3), max attempts and
    uniqueness (an `awa.Unique`; each can be overridden per enqueue).

    ``timeout`` (seconds or a timedelta, 1 ms to 7 days) is the kind's
    default timeout, applied by every worker that registers the class: a
    handler still running then is given up (an async one's task is
    cancelled, a sync one abandoned and reported) and the attempt fails
    with a timeout error, retried like any failure. A job's own
    (``awa.enqueue(..., timeout=...)``) wins.

    The kind defaults to the class name in snake case. Used bare
    (``@awa.job``) or called (``@awa.job("send_email", queue="email")``).
    Raises ``awa.ValidationError`` at once for a bad kind, queue,
    priority or max attempts.
    """

    def decorate(cls: type[T]) -> type[T]:
        if not (dataclasses.is_dataclass(cls) or _is_pydantic(cls)):
            raise TypeError(
                f"@awa.job needs a dataclass or a pydantic model, not {cls.__name__}; "
                "add @dataclasses.dataclass under it, or derive from pydantic.BaseModel"
            )
        spec = JobSpec(
            kind or _snake(cls.__name__), queue, priority, max_attempts, unique, timeout_seconds(timeout)
        )
        _check_spec(spec)
        setattr(cls, "__awa_job__", spec)
        return cls

    if isinstance(kind, type):
        cls, kind = kind, None
        return decorate(cls)
    # Refuse bad options where they are written, not at the class.
    _check_spec(JobSpec(kind or "placeholder", queue, priority, max_attempts, unique))
    timeout_seconds(timeout)
    return decorate


class RawJob:
    """A job without a class: a kind and JSON-compatible args."""

    __slots__ = ("spec", "args")

    def __init__(
        self,
        kind: str,
        args: Mapping[str, Any] | None = None,
        *,
        queue: str = DEFAULT_QUEUE,
        priority: int = DEFAULT_PRIORITY,
        max_attempts: int | None = None,
        unique: Unique | None = None,
    ) -> None:
        self.spec = JobSpec(kind, queue, priority, max_attempts, unique)
        self.args = dict(args or {})

    def __repr__(self) -> str:
        return f"RawJob({self.spec.kind!r}, {self.args!r}, queue={self.spec.queue!r})"


def spec_of(obj: Any) -> JobSpec:
    """The job spec of a job instance or class (or RawJob)."""
    if isinstance(obj, RawJob):
        return obj.spec
    spec = getattr(obj, "__awa_job__", None)
    if not isinstance(spec, JobSpec):
        name = obj.__name__ if isinstance(obj, type) else type(obj).__name__
        raise ValidationError(
            f"{name} is not a job: decorate its class with @awa.job(...) "
            "(or enqueue an awa.RawJob(kind, args))"
        )
    return spec


def args_of(obj: Any) -> dict[str, Any]:
    """A job's args as a JSON-compatible dict."""
    if isinstance(obj, RawJob):
        return obj.args
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if _is_pydantic(type(obj)):
        return obj.model_dump(mode="json")
    raise ValidationError(f"cannot turn {type(obj).__name__} into job args")


def to_json(what: str, value: Any) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValidationError(
            f"the {what} cannot be stored as JSON: {e}; use JSON types (str, int, float, "
            "bool, None, list, dict) or a pydantic model"
        ) from None


def from_args(cls: type[T], args: Any) -> T:
    """The typed job for `args` (raises TypeError/ValueError on mismatch)."""
    if _is_pydantic(cls):
        return cls.model_validate(args)  # type: ignore[attr-defined,no-any-return]
    if not isinstance(args, dict):
        raise TypeError(f"expected a JSON object, got {type(args).__name__}")
    return cls(**args)


def run_at_text(run_at: datetime | timedelta | None) -> str | None:
    """`run_at` as timestamptz text: an aware datetime, or a delay from now."""
    if run_at is None:
        return None
    if isinstance(run_at, timedelta):
        run_at = datetime.now(timezone.utc) + run_at
    if not isinstance(run_at, datetime):
        raise ValidationError(
            f"run_at must be a datetime or a timedelta, not {type(run_at).__name__}"
        )
    if run_at.tzinfo is None or run_at.utcoffset() is None:
        raise ValidationError(
            "run_at is a naive datetime: give it a time zone "
            "(datetime.now(timezone.utc) + ...) so it means one instant"
        )
    return run_at.isoformat()


class Enqueued(NamedTuple):
    """What one enqueue did."""

    id: int
    """The new job's id, or, when its unique key was taken (or the job is a
    duplicate by its awa.Unique spec), the id of the job holding it."""
    inserted: bool
    """False when the unique key was already held or the job is a
    duplicate (nothing was inserted)."""
    scheduled: bool
    """True when the job waits for its run_at."""


class WithOptions:
    """A job with per-enqueue options, for `enqueue_many`; also how
    enqueue middleware sees each job (with the call's options merged in),
    where ``queue`` and ``metadata`` may be changed."""

    __slots__ = ("job", "options")

    def __init__(
        self,
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
    ) -> None:
        self.job = job
        self.options = dict(
            queue=queue,
            priority=priority,
            run_at=run_at,
            max_attempts=max_attempts,
            unique_key=unique_key,
            metadata=metadata,
            unique=unique,
            timeout=timeout,
        )

    @property
    def kind(self) -> str:
        """The job's kind."""
        return spec_of(self.job).kind

    @property
    def queue(self) -> str:
        """The queue it goes to: its own option, else its class's."""
        queue = self.options.get("queue")
        return spec_of(self.job).queue if queue is None else queue

    @queue.setter
    def queue(self, value: str) -> None:
        self.options["queue"] = value

    @property
    def metadata(self) -> Mapping[str, Any] | None:
        """Its metadata option (None when it has none)."""
        return self.options.get("metadata")

    @metadata.setter
    def metadata(self, value: Mapping[str, Any] | None) -> None:
        self.options["metadata"] = value
