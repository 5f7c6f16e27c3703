"""Every transaction carries consumer offsets, so the group generation fences it
(kafka/committed_offsets.py): one that consumed nothing sends again those last committed,
never offsets of a transaction that did not commit, nor of a partition given up."""

from streamproc.kafka.committed_offsets import CommittedOffsets


def test_a_transaction_without_offsets_sends_again_the_committed_ones():
    offsets = CommittedOffsets()
    assert offsets.for_transaction({}) == {}  # nothing committed since the assignment: nothing known
    assert offsets.for_transaction({0: 5, 1: 7}) == {0: 5, 1: 7}
    offsets.committed()
    assert offsets.for_transaction({}) == {0: 5, 1: 7}  # due commands only: fenced all the same
    offsets.committed()
    assert offsets.for_transaction({1: 9}) == {0: 5, 1: 9}


def test_only_committed_offsets_are_sent_again_and_a_partition_given_up_is_forgotten():
    offsets = CommittedOffsets()
    offsets.for_transaction({0: 5})
    offsets.committed()
    offsets.for_transaction({0: 8})  # this transaction fails: the consumer seeks back to 5
    assert offsets.for_transaction({}) == {0: 5}
    offsets.committed()
    offsets.drop(0)  # revoked: its next owner commits its offsets
    assert offsets.for_transaction({}) == {}
