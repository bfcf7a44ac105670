"""Trace context from a Python producer: the current OpenTelemetry span's
W3C context goes into each job's metadata ("awa_trace"), through the SQL
producer; nothing without a span; a handler can make its own span a child
of the producer's from ctx.metadata."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

import awa
from conftest import running, wait_state


@awa.job("py_traced", queue="py_traced")
@dataclass
class Traced:
    n: int


def test_the_current_span_travels_with_the_job(db_url: str, client: awa.Client) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")

    with psycopg.connect(db_url) as conn:
        with tracer.start_as_current_span("signup") as span:
            one = awa.enqueue(conn, Traced(n=1))
            many = awa.enqueue_many(conn, [Traced(n=2), Traced(n=3)], metadata={"user": 7})
        lone = awa.enqueue(conn, Traced(n=4))
    sc = span.get_span_context()
    traceparent = f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{int(sc.trace_flags):02x}"

    assert client.get_job(one.id)["metadata"] == {"awa_trace": {"traceparent": traceparent}}
    for e in many:
        assert client.get_job(e.id)["metadata"] == {
            "user": 7,
            "awa_trace": {"traceparent": traceparent},
        }
    assert client.get_job(lone.id)["metadata"] is None

    # A handler's span, from the context the job carries, is the
    # producer span's child.
    def handle(job: Traced, ctx: awa.Context) -> None:
        parent = TraceContextTextMapPropagator().extract((ctx.metadata or {}).get("awa_trace", {}))
        with tracer.start_as_current_span(f"handle {job.n}", context=parent):
            pass

    worker = client.worker(queues={"py_traced": 2}).register(Traced, handle)
    with running(worker):
        wait_state(client, one.id, "completed")
        wait_state(client, lone.id, "completed")
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert spans["handle 1"].parent.span_id == sc.span_id
    assert spans["handle 1"].context.trace_id == sc.trace_id
    assert spans["handle 4"].parent is None
