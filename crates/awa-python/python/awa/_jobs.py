"""Typed jobs: a kind and defaults attached to a dataclass or pydantic
model, how a job becomes JSON args, and how args become the job again."""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Mapping, TypeVar, overload

from . import _awa
from ._awa import ValidationError

T = TypeVar("T")

DEFAULT_QUEUE = "default"
# Priority 1 runs first, 4 last; the default is the Rust client's (3).
DEFAULT_PRIORITY: int = _awa.DEFAULT_PRIORITY


@dataclass(frozen=True)
class JobSpec:
    """What `awa.job` attaches to a class (as `__awa_job__`)."""

    kind: str
    queue: str = DEFAULT_QUEUE
    priority: int = DEFAULT_PRIORITY
    max_attempts: int | None = None


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def _is_pydantic(cls: type) -> bool:
    return hasattr(cls, "model_validate") and hasattr(cls, "model_dump")


def _check_spec(spec: JobSpec) -> None:
    _awa.validate_job(spec.queue, spec.kind, "{}", spec.priority, spec.max_attempts)


@overload
def job(kind: type[T], /) -> type[T]: ...
@overload
def job(
    kind: str | None = None,
    *,
    queue: str = DEFAULT_QUEUE,
    priority: int = DEFAULT_PRIORITY,
    max_attempts: int | None = None,
) -> Callable[[type[T]], type[T]]: ...
def job(
    kind: Any = None,
    *,
    queue: str = DEFAULT_QUEUE,
    priority: int = DEFAULT_PRIORITY,
    max_attempts: int | None = None,
) -> Any:
    """Map a dataclass or pydantic model to a job kind, with its default
    queue, priority (1 runs first, 4 last; default 3) and max attempts
    (each can be overridden per enqueue).

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
        spec = JobSpec(kind or _snake(cls.__name__), queue, priority, max_attempts)
        _check_spec(spec)
        setattr(cls, "__awa_job__", spec)
        return cls

    if isinstance(kind, type):
        cls, kind = kind, None
        return decorate(cls)
    # Refuse bad options where they are written, not at the class.
    _check_spec(JobSpec(kind or "placeholder", queue, priority, max_attempts))
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
    ) -> None:
        self.spec = JobSpec(kind, queue, priority, max_attempts)
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
