"""Enqueue through a SQLAlchemy session or connection, in its
transaction. SQLAlchemy is imported only when this is used.

    with Session(engine) as session, session.begin():
        session.add(user)
        awa.sqlalchemy.enqueue(session, SendWelcome(user_id=user.id))

``awa.enqueue(session, job)`` does the same: the generic functions tell a
SQLAlchemy session or connection apart and run its statement themselves
(``awa._enqueue``), so this module only names them for SQLAlchemy users.
"""

from __future__ import annotations

from ._enqueue import Enqueued, enqueue, enqueue_many

__all__ = ["enqueue", "enqueue_many", "Enqueued"]
