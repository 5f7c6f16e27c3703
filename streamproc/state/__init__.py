"""Partition state in RocksDB: one database per partition, a column family per concern.

Entity classes (`JobState`, `IncidentState`, `KeyGenerator`) own their column families and
key codecs; processors call their methods and never see raw keys.
"""
