"""The context a running attempt sees: its job's fields, heartbeats,
checkpoints and cancellation. Below both the worker and the middleware
(which wraps each attempt), so neither has to import the other."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from . import _awa


class Context:
    """What a running attempt sees and can do. Sync methods block the
    calling thread (without the GIL); in async handlers use the `a...`
    variants, which run them in a thread."""

    __slots__ = ("_native", "args", "metadata")

    def __init__(self, native: _awa.NativeContext) -> None:
        self._native = native
        self.args: Any = json.loads(native.args_json)
        """The job's args as JSON (dict)."""
        metadata = native.metadata_json
        self.metadata: dict[str, Any] | None = None if metadata is None else json.loads(metadata)
        """The job's metadata, as enqueued (None when it had none)."""

    @property
    def job_id(self) -> int:
        return self._native.job_id

    @property
    def kind(self) -> str:
        return self._native.kind

    @property
    def queue(self) -> str:
        return self._native.queue

    @property
    def priority(self) -> int:
        return self._native.priority

    @property
    def attempt(self) -> int:
        """Which attempt this is: 1 on the first run; snoozes do not count."""
        return self._native.attempt

    @property
    def max_attempts(self) -> int:
        return self._native.max_attempts

    @property
    def run_lease(self) -> int:
        return self._native.run_lease

    def heartbeat(self, progress: int | None = None, message: str | None = None) -> bool:
        """Keep the attempt alive, optionally reporting progress (0-100)
        and a message. False when the attempt is no longer ours (cancelled
        by an operator, or rescued): stop, its result will be rejected."""
        return self._native.heartbeat(progress, message, None)

    def checkpoint(self) -> Any:
        """The checkpoint an earlier attempt saved, or None."""
        text = self._native.checkpoint_json()
        return None if text is None else json.loads(text)

    def save_checkpoint(self, value: Any) -> bool:
        """Save a JSON-compatible checkpoint for the next attempt (also a
        heartbeat); False when the attempt is no longer ours."""
        return self._native.save_checkpoint(json.dumps(value))

    def is_cancelled(self) -> bool:
        """True once the attempt was cancelled (by an operator, or rescued
        by maintenance): the worker learns it at once. Stop: the handler is
        given up `cancel_grace` seconds later and its result ignored."""
        return self._native.is_cancelled()

    def wait_cancelled(self, timeout: float | None = None) -> bool:
        """Block until the attempt is cancelled or `timeout` seconds pass
        (None: no limit); whether it was cancelled. For sync handlers: an
        interruptible sleep."""
        return self._native.wait_cancelled(timeout)

    async def cancelled(self) -> None:
        """Return once the attempt is cancelled (never, if it is not).
        An async handler's task is cancelled anyway `cancel_grace` seconds
        after the cancel; this lets it stop sooner, or clean up."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()

        def settle() -> None:
            if not fut.done():
                fut.set_result(None)

        self._native.on_cancelled(lambda: loop.call_soon_threadsafe(settle))
        await fut

    def is_shutting_down(self) -> bool:
        """True once the worker is shutting down: wrap up."""
        return self._native.is_shutting_down()

    async def aheartbeat(self, progress: int | None = None, message: str | None = None) -> bool:
        return await asyncio.to_thread(self.heartbeat, progress, message)

    async def acheckpoint(self) -> Any:
        return await asyncio.to_thread(self.checkpoint)

    async def asave_checkpoint(self, value: Any) -> bool:
        return await asyncio.to_thread(self.save_checkpoint, value)
