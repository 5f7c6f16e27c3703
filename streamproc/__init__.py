"""streamproc: a durable workflow and job engine on Kafka.

Commands arrive on a partitioned Kafka topic; one stream processor per partition
applies them to RocksDB state and answers with events, all committed in one Kafka
transaction. See README.md for the layout of the tree.
"""

__version__ = "0.1.0"
