"""Commands that are not valid records: their rejection still reaches the caller when its
request id (and reply partition) can be read, and an unknown content type is named as such."""

from __future__ import annotations

import orjson
import pytest

from streamproc.protocol import codec
from streamproc.protocol.codec import JSON_CONTENT_TYPE
from streamproc.protocol.records import Record, RecordType
from tests.engine.harness import Harness

JSON = [("content-type", JSON_CONTENT_TYPE)]


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path / "p0")
    yield harness
    harness.close()


def _rejected(events: list[Record]) -> Record:
    (ev,) = events
    assert ev.record_type is RecordType.COMMAND_REJECTION and ev.rejection_type == "UNDECODABLE"
    return ev


@pytest.mark.parametrize(("command", "reason"), [
    # decoding: no intent
    ({"value_type": "JOB", "request_id": "req-7", "reply_partition": 2}, "needs a string field 'intent'"),
    # schema validation: retries is no number
    ({"value_type": "JOB", "intent": "CREATE", "request_id": "req-7", "reply_partition": 2,
      "job": {"type": "q", "retries": "three"}}, "does not match schema"),
    # a bad SWF duration
    ({"value_type": "ACTIVITY_TASK", "intent": "SCHEDULE", "request_id": "req-7", "reply_partition": 2,
      "activity_task": {"start_to_close_timeout_ms": "soon"}}, "start_to_close_timeout_ms"),
])
def test_a_json_command_that_fails_keeps_its_request_id_and_is_answered(h, command, reason):
    ev = _rejected(h.send(orjson.dumps(command), headers=JSON))
    assert reason in ev.rejection_reason
    assert ev.request_id == "req-7"
    assert [(p, r.request_id, r.rejection_type) for p, r in h.replies] == [(2, "req-7", "UNDECODABLE")]


def test_an_unreadable_request_id_is_left_out(h):
    ev = _rejected(h.send(orjson.dumps({"value_type": "JOB", "request_id": 42, "reply_partition": "x"}),
                          headers=JSON))
    assert ev.request_id is None and h.replies == []
    ev = _rejected(h.send(b'{"request_id": "req-8", ', headers=JSON))  # not JSON: nothing can be read
    assert ev.request_id is None and "invalid JSON" in ev.rejection_reason


def test_an_unknown_content_type_is_named_not_decoded_as_avro(h):
    valid = codec.encode(Record.command("JOB", "CREATE", {"type": "q", "payload": "{}"}, request_id="r"))
    ev = _rejected(h.send(valid, headers=[("content-type", b"application/x-protobuf")]))
    assert ev.rejection_reason == ("cannot decode command: unknown content-type 'application/x-protobuf': expected "
                                   "application/vnd.streamproc.record.v1+avro or application/json")
    ev = _rejected(h.send(valid, headers=[("content-type", b"text/" + b"x" * 500)]))
    assert "unknown content-type 'text/" + "x" * 35 + "...'" in ev.rejection_reason
    assert len(ev.rejection_reason) < 200
    # the same bytes with the Avro content type, or none, are a command
    (created,) = h.send(valid, headers=[("content-type", codec.AVRO_CONTENT_TYPE)])
    assert created.intent == "CREATED"
    (created,) = h.send(valid)
    assert created.intent == "CREATED"


def test_a_rejection_quotes_only_an_excerpt_of_a_long_value(h):
    # schema validation: fastavro's own message would repeat the 100 kB payload whole
    command = {"value_type": "JOB", "intent": "CREATE", "request_id": "req-9", "reply_partition": 1,
               "job": {"type": "q", "payload": "x" * 100_000, "retries": "three" * 1000}}
    ev = _rejected(h.send(orjson.dumps(command), headers=JSON))
    assert "streamproc.JobRecord.retries is 'threethree" in ev.rejection_reason
    assert "expected 'int'" in ev.rejection_reason
    assert len(ev.rejection_reason) < 300 and ev.request_id == "req-9"
    # a name no processor has: clipped, not quoted in full
    (ev,) = h.send(Record.command("JOB", "X" * 10_000, {}))
    assert ev.rejection_type == "UNKNOWN_COMMAND"
    assert ev.rejection_reason == "no processor for JOB " + "X" * 40 + "..."
