"""The engine's answers to faults, without a broker: classification, what gets replaced,
when an identity conflict stops the engine, the watchdog and the throttled client log.
Time is a manual clock throughout."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError, KafkaException

from streamproc.kafka.recovery import FaultPolicy, Recovery
from streamproc.kafka.watchdog import Progress, Watchdog
from streamproc.kafka.client_log import ClientLog
from streamproc.kafka.group_standing import GroupStanding
from streamproc.kafka.errors import (ClientFailure, CommitTimedOut, Fault, IdentityConflict, Origin,
                                     ProducerCallUnfinished, classify)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _exc(code: int, text: str = "", **flags) -> KafkaException:
    return KafkaException(KafkaError(code, text, **flags))


@pytest.mark.parametrize("exc, transactional, fault", [
    (_exc(KafkaError._TIMED_OUT, retriable=True), True, Fault.RETRIABLE),
    (_exc(KafkaError._INCONSISTENT, txn_requires_abort=True), True, Fault.ABORTABLE),
    (_exc(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, fatal=True), True, Fault.FATAL),
    (_exc(KafkaError._FENCED, fatal=True), True, Fault.FENCED),
    (_exc(KafkaError.PRODUCER_FENCED), True, Fault.FENCED),
    # A consumer's fatal error event: the _FATAL code, no flag, the cause in the text.
    (_exc(KafkaError._FATAL, "Fatal error: Broker: Static consumer fenced by other consumer with same "
                             "group.instance.id"), False, Fault.FENCED),
    (_exc(KafkaError._FATAL, "Fatal error: something else"), False, Fault.FATAL),
    # No flag at all: fatal from a transactional call (librdkafka's advice), else abortable.
    (_exc(KafkaError._STATE), True, Fault.FATAL),
    (_exc(KafkaError._STATE), False, Fault.ABORTABLE),
    (TimeoutError("admin"), False, Fault.RETRIABLE),
    (CommitTimedOut("stuck"), False, Fault.RETRIABLE),
])
def test_errors_are_classified_as_librdkafka_documents(exc, transactional, fault):
    assert classify(exc, transactional=transactional) is fault
    assert classify(ClientFailure(Origin.PRODUCER, exc), transactional=transactional) is fault


def _recovery(clock: Clock, **policy) -> Recovery:
    return Recovery("e1", Progress(), FaultPolicy(**policy), fresh_producer_s=10, clock=clock)


def test_the_dead_client_and_only_it_is_replaced():
    clock = Clock()
    r = _recovery(clock)
    fatal = _exc(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, fatal=True)
    d = r.failed(ClientFailure(Origin.PRODUCER, fatal), producer_age_s=100, partitions=[0])
    assert (d.producer, d.consumer) == (True, False)
    d = r.failed(ClientFailure(Origin.CONSUMER, _exc(KafkaError._FATAL, "boom")), producer_age_s=100, partitions=[0])
    assert (d.producer, d.producers, d.consumer) == (False, False, True)
    d = r.failed(ClientFailure(Origin.PRODUCER, _exc(KafkaError._INCONSISTENT, txn_requires_abort=True)), 100, [0])
    assert (d.producer, d.producers, d.consumer) == (False, False, False)
    # A timeout of a producer call: the broker was away, both producers are replaced.
    d = r.failed(ClientFailure(Origin.PRODUCER, _exc(KafkaError._TIMED_OUT, retriable=True)), 100, [0])
    assert d.producers and not d.consumer
    assert r.failed(CommitTimedOut("x"), 100, [0]).producers


def test_an_unfinished_producer_call_is_resumed_on_the_same_producers():
    r = _recovery(Clock())
    resume = _exc(KafkaError._TIMED_OUT, "Timed out waiting for operation to finish, retry call to resume",
                  retriable=True)
    d = r.failed(ProducerCallUnfinished(resume), producer_age_s=100, partitions=[0])
    assert (d.producer, d.producers, d.consumer) == (False, False, False)
    # the same timeout from a commit still means the broker went away: both are replaced
    assert r.failed(ClientFailure(Origin.PRODUCER, resume), 100, [0]).producers


def test_a_producer_call_that_never_finishes_is_given_up_after_its_bound():
    r = _recovery(Clock())
    resume = ProducerCallUnfinished(_exc(KafkaError._TIMED_OUT, "retry call to resume", retriable=True))
    assert [r.failed(resume, 100, [0]).producers for _ in range(4)] == [False, True, False, True]
    r.failed(resume, 100, [0])
    r.committed()  # a commit between: the count starts again
    assert not r.failed(resume, 100, [0]).producers
    assert r.failed(resume, 100, [0]).producers


def test_a_consumer_whose_calls_keep_timing_out_is_replaced():
    r = _recovery(Clock())
    timeout = ClientFailure(Origin.CONSUMER, _exc(KafkaError._TIMED_OUT, "Failed to get committed offsets",
                                                  retriable=True))
    assert [r.failed(timeout, 100, [0]).consumer for _ in range(4)] == [False, True, False, True]
    r.failed(timeout, 100, [0])
    r.committed()  # a commit between: the count starts again
    assert not r.failed(timeout, 100, [0]).consumer
    # other failures of the consumer do not count
    other = ClientFailure(Origin.CONSUMER, _exc(KafkaError._STATE, "not assigned"))
    assert not r.failed(other, 100, [0]).consumer
    assert r.failed(timeout, 100, [0]).consumer


def test_backoff_grows_to_its_bound_and_a_commit_resets_it():
    clock = Clock()
    r = _recovery(clock, backoff_min_s=0.1, backoff_max_s=2.0)
    waits = []
    for _ in range(8):
        r.failed(RuntimeError("down"), 100, [])
        waits.append(round(r._next_attempt - clock.t, 2))
    assert waits == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0, 2.0]
    assert r.progress.failing_since == 1000.0 and r.progress.attempts == 8
    r.committed()
    assert r.progress.failing_since is None and r.progress.attempts == 0


def test_fencing_by_our_own_past_is_survived_and_repeated_fencing_stops_the_engine():
    clock = Clock()
    r = _recovery(clock, conflict_limit=3, conflict_window_s=60)
    fenced = ClientFailure(Origin.PRODUCER, _exc(KafkaError.PRODUCER_FENCED))
    # A producer fenced long after its init: its transaction expired while the broker was away.
    for _ in range(5):
        r.failed(fenced, producer_age_s=30, partitions=[0])
        clock.t += 1
    # Fenced right after a fresh init_transactions: someone else initialised our id.
    r.failed(fenced, producer_age_s=1, partitions=[0])
    clock.t += 70  # an old one leaves the window
    r.failed(fenced, producer_age_s=1, partitions=[0])
    r.failed(_exc(KafkaError.FENCED_INSTANCE_ID), producer_age_s=100, partitions=[0])  # the consumer counts too
    with pytest.raises(IdentityConflict, match="STREAMPROC_ENGINE_ID"):
        r.failed(fenced, producer_age_s=2, partitions=[0])


def test_a_consumer_fenced_soon_after_a_lost_connection_is_our_own_rejoin():
    """After a broker restart a static consumer is fenced by its own rejoin: a broker
    restarted three times in a minute must not look like another process with our id."""
    clock = Clock()
    r = _recovery(clock, conflict_limit=3, conflict_window_s=60)
    consumer_fenced = _exc(KafkaError.FENCED_INSTANCE_ID)
    for _ in range(5):
        r.failed(consumer_fenced, producer_age_s=100, partitions=[0], connected_s=8)
        clock.t += 5
    r.failed(consumer_fenced, producer_age_s=100, partitions=[0], connected_s=31)
    r.failed(consumer_fenced, producer_age_s=100, partitions=[0], connected_s=40)
    with pytest.raises(IdentityConflict):
        r.failed(consumer_fenced, producer_age_s=100, partitions=[0], connected_s=45)


def test_the_watchdog_reports_once_per_interval_and_asks_for_new_clients_after_its_bound():
    clock = Clock()
    progress = Progress(step_at=clock.t)
    dog = Watchdog(progress, lambda: [0, 1], FaultPolicy(stall_after_s=15, stall_log_interval_s=15,
                                                      rebuild_after_s=60), clock=clock)
    logged = []
    import streamproc.kafka.watchdog as module
    real = module.log
    module.log = type("L", (), {"warning": lambda self, event, **kw: logged.append((event, kw))})()
    try:
        for _ in range(14):  # healthy: steps finish
            clock.t += 1
            progress.step_at = clock.t
            dog.check()
        assert logged == []
        progress.stage = "commit_wait"
        for _ in range(59):  # stuck in one stage for 59 s
            clock.t += 1
            dog.check()
        stalls = [kw for event, kw in logged if event == "engine_stalled"]
        assert [s["seconds"] for s in stalls] == [15.0, 30.0, 45.0]
        assert {s["reason"] for s in stalls} == {"step_not_finishing"} and stalls[0]["stage"] == "commit_wait"
        assert not progress.rebuild_requested
        clock.t += 1
        dog.check()
        assert progress.rebuild_requested
    finally:
        module.log = real


def test_the_watchdog_asks_for_new_clients_once_the_broker_answers_while_the_engine_still_fails():
    """After a broker stall the engine's clients stayed stuck for seconds to minutes while
    new ones worked at once: once a client of the watchdog's own gets answers for 4 s and
    the loop still fails, the clients are replaced, without waiting for the 60 s bound."""
    clock = Clock()
    progress = Progress(step_at=clock.t)
    answers = {"now": False}
    probes = []

    def broker_answers() -> bool:
        probes.append(clock.t)
        return answers["now"]
    dog = Watchdog(progress, lambda: [0], FaultPolicy(stall_after_s=15, rebuild_after_s=60, broker_probe_after_s=10,
                                                      broker_probe_interval_s=2, rebuild_when_answering_s=4),
                   clock=clock, broker_answers=broker_answers)
    logged = []
    import streamproc.kafka.watchdog as module
    real = module.log
    module.log = type("L", (), {"warning": lambda self, event, **kw: logged.append((clock.t, event, kw))})()
    try:
        for _ in range(30):  # healthy: never asked
            clock.t += 1
            progress.step_at = clock.t
            dog.check()
        progress.stage = "restore"
        for _ in range(30):  # a long step that is not failing (a big restore): work, not a wedge
            clock.t += 1
            dog.check()
        assert probes == []
        progress.stage, progress.step_at = "starting", clock.t
        progress.failing_since = clock.t  # commits fail from now on: the broker is stalled
        began = clock.t
        for _ in range(20):
            clock.t += 1
            dog.check()
        assert [t - began for t in probes] == [10, 12, 14, 16, 18, 20]  # from 10 s on, every 2 s
        assert not progress.rebuild_requested
        answers["now"] = True  # the broker is back; the engine's clients are not
        for _ in range(5):
            clock.t += 1
            dog.check()
        assert not progress.rebuild_requested  # answered at 22 s only: not yet 4 s
        clock.t += 1
        dog.check()
        assert progress.rebuild_requested  # 26 s: answering for 4 s
        rebuilds = [(t - began, kw) for t, event, kw in logged if event == "engine_clients_rebuild_requested"]
        assert rebuilds == [(26, {"reason": "commits_failing", "stage": "starting", "seconds": 26.0,
                                  "broker_answering_s": 4.0})]
        progress.rebuild_requested = False  # the loop replaced them, and still fails:
        for _ in range(20):  # no second request while the broker keeps answering ...
            clock.t += 1
            dog.check()
        assert not progress.rebuild_requested
        answers["now"] = False  # ... but one after the broker stalled and came back again
        for _ in range(4):
            clock.t += 1
            dog.check()
        answers["now"] = True
        for _ in range(6):
            clock.t += 1
            dog.check()
        assert progress.rebuild_requested
        assert [kw.get("broker_answering_s") for _, event, kw in logged
                if event == "engine_clients_rebuild_requested"] == [4.0, 4.0]
        progress.failing_since = None  # committed: the stall is over, the probing too
        progress.step_at = clock.t
        asked = len(probes)
        for _ in range(5):
            clock.t += 1
            progress.step_at = clock.t
            dog.check()
        assert len(probes) == asked
    finally:
        module.log = real


def test_client_lines_are_throttled_per_kind_with_a_count_of_what_was_left_out():
    clock = Clock()
    client_log = ClientLog("engine", interval_s=30, clock=clock)
    seen = [client_log.due("log:FAIL") for _ in range(100)]
    assert seen[0] == 0 and seen[1:] == [None] * 99
    assert client_log.due("error:-187") == 0  # another kind shows at once
    clock.t += 30
    assert client_log.due("log:FAIL") == 99


def test_a_consumer_out_of_its_group_is_noticed_from_its_statistics():
    standing = GroupStanding()

    def stats(state: str, join_state: str, assigned: int = 0) -> str:
        return json.dumps({"cgrp": {"state": state, "join_state": join_state, "assignment_size": assigned}})
    standing.on_stats(stats("up", "steady"))
    assert standing.left_out_for(100.0) == 0.0  # settled, even with nothing assigned
    standing.on_stats(stats("query-coord", "init"))
    assert standing.left_out_for(101.0) == 0.0  # the clock starts
    assert standing.left_out_for(131.0) == 30.0
    standing.on_stats(stats("up", "wait-join", assigned=2))  # a rebalance while holding partitions
    assert standing.left_out_for(132.0) == 0.0
    standing.on_stats(stats("up", "wait-join"))
    assert standing.left_out_for(140.0) == 0.0 and standing.left_out_for(150.0) == 10.0
    standing.on_stats("not json")  # ignored
    assert standing.left_out_for(151.0) == 11.0


def test_a_caller_that_reads_the_live_assignment_overrides_the_lagging_statistics():
    standing = GroupStanding()
    standing.on_stats(json.dumps({"cgrp": {"state": "up", "join_state": "wait-join", "assignment_size": 3}}))
    # The statistics still say 3 partitions, but the consumer has none any more: out.
    assert standing.left_out_for(10.0, holding=False) == 0.0 and standing.unsettled_since == 10.0
    assert standing.left_out_for(25.0, holding=False) == 15.0
    # The statistics say nothing assigned, but the live assignment has a partition: in.
    standing.on_stats(json.dumps({"cgrp": {"state": "up", "join_state": "wait-join", "assignment_size": 0}}))
    assert standing.left_out_for(26.0, holding=True) == 0.0 and standing.unsettled_since is None
