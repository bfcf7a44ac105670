"""Awa from Python: enqueue in your own transaction, run a Python worker.

Run it with DATABASE_URL pointing at a migrated database.
"""

import os
from dataclasses import dataclass

import psycopg

import awa

DATABASE_URL = os.environ["DATABASE_URL"]


@awa.job("send_welcome", queue="email", max_attempts=5)
@dataclass
class SendWelcome:
    user_id: int
    email: str


def sign_up(email: str) -> int:
    # One transaction: the user row and its job commit together (or not).
    with psycopg.connect(DATABASE_URL) as conn:
        row = conn.execute(
            "INSERT INTO users (email) VALUES (%s) RETURNING id", (email,)
        ).fetchone()
        awa.enqueue(conn, SendWelcome(user_id=row[0], email=email))
    return row[0]


client = awa.Client(DATABASE_URL)
worker = client.worker(queues={"email": 4})
sent: list[int] = []


def send_welcome(job: SendWelcome, ctx: awa.Context) -> None:
    if job.email.endswith("@flaky.example") and ctx.attempt == 1:
        raise awa.RetryAfter(0.1, "the mail server is busy")
    print(f"welcome mail to {job.email} (user {job.user_id}, attempt {ctx.attempt})")
    sent.append(job.user_id)
    if len(sent) == 2:
        worker.stop()  # a real worker runs until SIGTERM or Ctrl-C


worker.register(SendWelcome, send_welcome)

if __name__ == "__main__":
    with psycopg.connect(DATABASE_URL) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS users (id bigserial PRIMARY KEY, email text)")
    sign_up("ada@example.com")
    sign_up("bob@flaky.example")
    stats = worker.run()
    print(f"stopped after {stats['completed']} completed jobs")
