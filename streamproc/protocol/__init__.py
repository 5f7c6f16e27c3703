"""What travels on the topics: records, intents, their Avro codec, topic names, partitioning."""
