"""Enqueue through a SQLAlchemy session or connection, in its
transaction. SQLAlchemy is imported only when this is used.

    with Session(engine) as session, session.begin():
        session.add(user)
        awa.sqlalchemy.enqueue(session, SendWelcome(user_id=user.id))

``awa.enqueue(session, job)`` comes here too.
"""

from __future__ import annotations

import inspect
from typing import Any

# enqueue and enqueue_many are the generic ones: they send a session here.
from ._enqueue import SQLALCHEMY_SQL, Enqueued, _rows, enqueue, enqueue_many

__all__ = ["enqueue", "enqueue_many", "Enqueued"]


def _execute(conn: Any, p: dict[str, list[Any]]) -> Any:
    from sqlalchemy import text

    if not p["kinds"]:
        if inspect.iscoroutinefunction(getattr(type(conn), "execute", None)):
            return _empty()
        return []
    statement = text(SQLALCHEMY_SQL)
    result = conn.execute(statement, p)
    if inspect.isawaitable(result):
        return _fetch_async(result)
    return _rows(result.fetchall())


async def _fetch_async(result: Any) -> list[Enqueued]:
    return _rows((await result).fetchall())


async def _empty() -> list[Enqueued]:
    return []
