"""Typed values end to end on a real broker, as a Temporal user writes them: a workflow
takes a dataclass, passes one to an activity and gets one back, a child returns one, a
signal and a query carry them, and the client gets a dataclass as the result. Nothing but
the annotations says what the types are; the wire stays plain JSON."""

from __future__ import annotations

import dataclasses
import logging
import enum
import uuid
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from streamproc import activity, workflow
from streamproc.client import Client
from streamproc.clock import ManualClock
from streamproc.common import RetryPolicy
from streamproc.exceptions import ApplicationError, WorkflowFailureError
from streamproc.settings import Settings
from streamproc.worker import Worker
from tests.support.engines import EngineThread

pytestmark = pytest.mark.kafka

QUEUE = "greetings"


class Tone(enum.Enum):
    WARM = "warm"
    FORMAL = "formal"


@dataclasses.dataclass
class Greeting:
    greeting: str
    name: str
    tone: Tone
    at: datetime


@dataclasses.dataclass
class Card:
    text: str
    greeting: Greeting
    id: uuid.UUID
    signed_by: list[str] = dataclasses.field(default_factory=list)


@activity.defn
def compose(g: Greeting) -> Card:
    if not isinstance(g, Greeting) or not isinstance(g.tone, Tone) or not isinstance(g.at, datetime):
        raise ApplicationError(f"argument arrived untyped: {g!r}", non_retryable=True)
    return Card(f"{g.greeting}, {g.name}!", g, uuid.UUID(int=7))


@workflow.defn
class Signer:
    @workflow.run
    async def run(self, card: Card, who: str) -> Card:
        return dataclasses.replace(card, signed_by=[*card.signed_by, who])


@workflow.defn
class GreetingWorkflow:
    def __init__(self) -> None:
        self.signers: list[str] = []

    @workflow.run
    async def run(self, g: Greeting) -> Card:
        card = await workflow.execute_activity(compose, g, start_to_close_timeout=timedelta(seconds=30))
        if not isinstance(card, Card):
            raise ApplicationError(f"activity result arrived untyped: {card!r}", non_retryable=True)
        await workflow.wait_condition(lambda: bool(self.signers))
        signed = await workflow.execute_child_workflow(Signer.run, args=[card, self.signers[0].upper()],
                                                       id=f"{workflow.info().workflow_id}-signer")
        if not isinstance(signed, Card):
            raise ApplicationError(f"child result arrived untyped: {signed!r}", non_retryable=True)
        return signed

    @workflow.signal
    def sign(self, signer: Greeting) -> None:
        self.signers.append(signer.name)

    @workflow.query
    def greeting_tone(self, default: Tone) -> Tone:
        return Tone.FORMAL if self.signers else default


@activity.defn
def count_letters(g: Greeting) -> int:
    return len(g.name)


@workflow.defn
class BadInput:
    @workflow.run
    async def run(self) -> int:
        return await workflow.execute_activity(count_letters, {"greeting": "hi", "name": 3},
                                               start_to_close_timeout=timedelta(seconds=30),
                                               retry_policy=RetryPolicy(maximum_attempts=1))


def test_dataclasses_travel_client_workflow_activity_child_and_back(bootstrap, namespace, tmp_path):
    settings = Settings(bootstrap=bootstrap, namespace=namespace, partitions=2,
                        state_dir=tmp_path, engine_id="typed")
    at = datetime(2024, 5, 1, 9, 30, tzinfo=UTC)
    with EngineThread(settings, clock=ManualClock(), idle_poll_ms=10), Client(bootstrap, namespace) as client, \
            Worker(client, task_queue=QUEUE, workflows=[GreetingWorkflow, Signer, BadInput],
                   activities=[compose, count_letters]):
        handle = client.start_workflow(GreetingWorkflow.run, Greeting("Hello", "World", Tone.WARM, at),
                                       id="greeting-1", task_queue=QUEUE)
        assert handle.query(GreetingWorkflow.greeting_tone, Tone.WARM) == Tone.WARM
        handle.signal(GreetingWorkflow.sign, Greeting("Hi", "ada", Tone.FORMAL, at))
        card = handle.result(timeout=60)
        assert card == Card("Hello, World!", Greeting("Hello", "World", Tone.WARM, at), uuid.UUID(int=7),
                            signed_by=["ADA"])
        assert handle.query(GreetingWorkflow.greeting_tone, Tone.WARM) is Tone.FORMAL

        # The wire is plain JSON any language reads; a handle without a type gets it as JSON.
        events = {e["event_type"]: e["attributes"] for e in handle.fetch_history().events}
        assert orjson.loads(events["ACTIVITY_TASK_SCHEDULED"]["input"]) == [
            {"greeting": "Hello", "name": "World", "tone": "warm", "at": "2024-05-01T09:30:00+00:00"}]
        plain = client.get_workflow_handle("greeting-1").result(timeout=60)
        assert plain["id"] == str(uuid.UUID(int=7)) and plain["signed_by"] == ["ADA"]
        assert client.get_workflow_handle("greeting-1", result_type=Card).result(timeout=60) == card

        # An argument that does not fit the activity's annotation fails the attempt, and says where.
        with pytest.raises(WorkflowFailureError) as failed:
            client.execute_workflow(BadInput.run, id="bad-input-1", task_queue=QUEUE, result_timeout=60)
        causes, error = [], failed.value.cause
        while error is not None:
            causes.append(error)
            error = error.cause
        assert [getattr(c, "type", None) for c in causes] == ["ActivityError", "PayloadTypeError"]
        assert "as Greeting: Expected `str`, got `int` - at `$.name`" in causes[-1].message


# The example as far as today's synchronous client goes: Temporal's imports with
# `temporalio` replaced by `streamproc`, loggers that carry their context.
@dataclasses.dataclass
class Salutation:
    greeting: str
    name: str


@activity.defn
async def salute(g: Salutation) -> str:
    activity.logger.info("composing %s", g)
    return f"{g.greeting}, {g.name}!"


@workflow.defn
class SalutationWorkflow:
    @workflow.run
    async def run(self, name: str) -> str:
        workflow.logger.info("running for %s", name)
        return await workflow.execute_activity(salute, Salutation("Hello", name),
                                               start_to_close_timeout=timedelta(seconds=10))


def test_the_temporal_example_runs_and_logs_with_context(bootstrap, namespace, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="streamproc")
    settings = Settings(bootstrap=bootstrap, namespace=namespace, partitions=1,
                        state_dir=tmp_path, engine_id="example")
    with EngineThread(settings, clock=ManualClock(), idle_poll_ms=10), Client(bootstrap, namespace) as client, \
            Worker(client, task_queue="hello", workflows=[SalutationWorkflow], activities=[salute]):
        assert client.execute_workflow(SalutationWorkflow.run, "World", id="hello-1", task_queue="hello",
                                       result_timeout=60) == "Hello, World!"
    (ran,) = [r for r in caplog.records if r.name == "streamproc.workflow"]
    assert ran.getMessage().startswith("running for World ({'attempt': 1, 'namespace': ")
    assert ran.temporal_workflow["workflow_id"] == "hello-1" and ran.temporal_workflow["namespace"] == namespace
    (composed,) = [r for r in caplog.records if r.name == "streamproc.activity"]
    assert composed.getMessage().startswith("composing Salutation(greeting='Hello', name='World') (")
    assert composed.temporal_activity["activity_type"] == "salute"
    assert composed.temporal_activity["namespace"] == namespace
