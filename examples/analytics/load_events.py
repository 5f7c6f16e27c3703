"""Load streamproc's events topic into DuckDB, then answer two questions with SQL:

- activity schedule-to-start latency, p99, per task queue and hour;
- failed workflows by type.

    python examples/analytics/load_events.py --bootstrap 127.0.0.1:19092 --namespace streamproc \\
        --schema-registry http://127.0.0.1:8081/apis/ccompat/v7 [--database events.duckdb] [--output json]

It reads the topic as any analytics consumer would, and imports nothing from streamproc:
read_committed (only what the engine committed), every partition from the beginning up to
its end as of the start. Events in the Schema Registry wire format (the engine ran with
STREAMPROC_SCHEMA_REGISTRY_URL) are decoded by confluent-kafka's AvroDeserializer with the
schema the registry holds; without a registry, by fastavro with the files in `schemas/`.

Needs `pip install duckdb 'confluent-kafka[schemaregistry]'`.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
import uuid
from pathlib import Path

import duckdb
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
#: In the content-type of events written in the Schema Registry wire format.
FRAMED = b"framing=schema-registry"
#: Named types before the types that use them.
SCHEMA_FILES = ("JobRecord", "IncidentRecord", "FailureRecord", "RetryPolicyRecord",
                "ActivityTaskRecord", "WorkflowRecord", "ScheduleRecord", "JobStreamRecord", "Record")

TABLES = """
CREATE OR REPLACE TABLE events (
    partition INTEGER, "offset" BIGINT, record_type VARCHAR, value_type VARCHAR, intent VARCHAR,
    key BIGINT, timestamp_ms BIGINT, rejection_type VARCHAR, rejection_reason VARCHAR);
CREATE OR REPLACE TABLE activity_events (
    key BIGINT, intent VARCHAR, activity_id VARCHAR, activity_type VARCHAR, task_queue VARCHAR,
    attempt INTEGER, scheduled_time_ms BIGINT, started_time_ms BIGINT, retry_state VARCHAR,
    failure_message VARCHAR, timestamp_ms BIGINT);
CREATE OR REPLACE TABLE workflow_events (
    workflow_id VARCHAR, run_id VARCHAR, workflow_type VARCHAR, task_queue VARCHAR,
    event_id BIGINT, event_type VARCHAR, event_time_ms BIGINT, attributes JSON);
"""

#: Two sources of waits, unioned. An activity a client schedules: its ActivityTaskStarted
#: (written when the attempt closes, as in Temporal) carries the final attempt's scheduled and
#: started times. An activity a workflow schedules is in the workflow's history: its
#: ACTIVITY_TASK_STARTED event is stamped with the attempt's start and points at its
#: ACTIVITY_TASK_SCHEDULED event. Only first attempts count there, since the scheduled event's
#: time is the first attempt's (a retry's wait would include its backoff).
SCHEDULE_TO_START_P99 = """
WITH waits AS (
    SELECT task_queue, scheduled_time_ms, started_time_ms
    FROM activity_events
    WHERE intent = 'ActivityTaskStarted'
    UNION ALL
    SELECT json_extract_string(scheduled.attributes, '$.task_queue'),
           scheduled.event_time_ms, started.event_time_ms
    FROM workflow_events AS started
    JOIN workflow_events AS scheduled
      ON scheduled.workflow_id = started.workflow_id AND scheduled.run_id = started.run_id
     AND scheduled.event_id = CAST(json_extract(started.attributes, '$.scheduled_event_id') AS BIGINT)
    WHERE started.event_type = 'ACTIVITY_TASK_STARTED' AND scheduled.event_type = 'ACTIVITY_TASK_SCHEDULED'
      AND CAST(json_extract(started.attributes, '$.attempt') AS INTEGER) = 1
)
SELECT task_queue,
       strftime(date_trunc('hour', epoch_ms(scheduled_time_ms)), '%Y-%m-%d %H:00') AS hour,
       count(*) AS activities,
       quantile_cont(started_time_ms - scheduled_time_ms, 0.99) AS p99_ms
FROM waits
GROUP BY ALL
ORDER BY task_queue, hour
"""

FAILED_WORKFLOWS = """
SELECT workflow_type,
       count(*) AS failed,
       arg_max(json_extract_string(attributes, '$.failure.message'), event_time_ms) AS last_failure
FROM workflow_events
WHERE event_type = 'WORKFLOW_EXECUTION_FAILED'
GROUP BY workflow_type
ORDER BY failed DESC, workflow_type
"""


def avro_decoder(registry_url: str | None):
    """message -> dict: the registry's AvroDeserializer, or fastavro with the files in schemas/."""
    if registry_url:
        from confluent_kafka.schema_registry import SchemaRegistryClient
        from confluent_kafka.schema_registry.avro import AvroDeserializer
        from confluent_kafka.serialization import MessageField, SerializationContext

        deserialize = AvroDeserializer(SchemaRegistryClient({"url": registry_url}))
        return lambda msg: deserialize(msg.value(), SerializationContext(msg.topic(), MessageField.VALUE,
                                                                         msg.headers()))
    import fastavro

    named: dict = {}
    for name in SCHEMA_FILES:
        schema = fastavro.parse_schema(json.loads((SCHEMAS / f"{name}.avsc").read_text()), named_schemas=named)

    def decode(msg) -> dict:
        value = msg.value()
        if FRAMED in dict(msg.headers() or ()).get("content-type", b""):
            value = value[5:]  # magic byte and schema id: the schema is the same files
        return fastavro.schemaless_reader(io.BytesIO(value), schema)
    return decode


def read_events(bootstrap: str, topic: str, decode, timeout_s: float = 60.0):
    """Yield (partition, offset, record) for every committed event up to the end as of now."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"analytics-{uuid.uuid4().hex}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        if metadata.error is not None:
            raise SystemExit(f"topic {topic}: {metadata.error.str()}")
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in metadata.partitions}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        deadline = time.monotonic() + timeout_s
        pending = {p for p, end in ends.items() if end > 0}
        while pending:
            if time.monotonic() > deadline:
                raise SystemExit(f"{topic}: not read to its end within {timeout_s:.0f} s")
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is None:
                    yield msg.partition(), msg.offset(), decode(msg)
            # transaction markers take offsets too: done once the position passed the end
            pending = {tp.partition for tp in consumer.position([TopicPartition(topic, p) for p in pending])
                       if tp.offset < ends[tp.partition]}
    finally:
        consumer.close()


def load(db: duckdb.DuckDBPyConnection, records) -> int:
    db.execute(TABLES)
    events, activities, workflows = [], [], []
    for partition, offset, r in records:
        events.append((partition, offset, r["record_type"], r["value_type"], r["intent"], r["key"],
                       r["timestamp_ms"], r["rejection_type"], r["rejection_reason"]))
        if r["record_type"] != "EVENT":
            continue
        if (a := r["activity_task"]) is not None:
            activities.append((r["key"], r["intent"], a["activity_id"], a["activity_type"], a["task_queue"],
                               a["attempt"], a["scheduled_time_ms"], a["started_time_ms"], a["retry_state"],
                               (a["failure"] or {}).get("message"), r["timestamp_ms"]))
        elif (w := r["workflow"]) is not None:
            workflows.append((w["workflow_id"], w["run_id"], w["workflow_type"], w["task_queue"], w["event_id"],
                              r["intent"], w["event_time_ms"], w["attributes"]))
    for table, rows in (("events", events), ("activity_events", activities), ("workflow_events", workflows)):
        if rows:
            db.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    return len(events)


def answers(db: duckdb.DuckDBPyConnection) -> dict[str, list[dict]]:
    def rows(sql: str) -> list[dict]:
        cursor = db.execute(sql)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]
    return {"schedule_to_start_p99": rows(SCHEDULE_TO_START_P99), "failed_workflows": rows(FAILED_WORKFLOWS)}


def print_table(title: str, rows: list[dict]) -> None:
    print(f"\n{title}")
    if not rows:
        print("  (none)")
        return
    names = list(rows[0])
    widths = [max(len(n), *(len(str(r[n])) for r in rows)) for n in names]
    for cells in [names, *([str(r[n]) for n in names] for r in rows)]:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:19092")
    parser.add_argument("--namespace", default="streamproc", help="topic prefix: reads <namespace>.events")
    parser.add_argument("--schema-registry", default=None,
                        help="registry URL (Confluent's API), when the engine ran with STREAMPROC_SCHEMA_REGISTRY_URL")
    parser.add_argument("--database", default=":memory:", help="a DuckDB file to keep the tables in")
    parser.add_argument("--output", choices=("table", "json"), default="table")
    args = parser.parse_args(argv)

    db = duckdb.connect(args.database)
    count = load(db, read_events(args.bootstrap, f"{args.namespace}.events", avro_decoder(args.schema_registry)))
    result = answers(db)
    if args.output == "json":
        print(json.dumps({"events": count, **result}))
    else:
        print(f"{count} events loaded into {args.database}")
        print_table("activity schedule-to-start latency, p99 (ms), per task queue and hour",
                    result["schedule_to_start_p99"])
        print_table("failed workflows by type", result["failed_workflows"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
