"""The thin Kafka layer: client configurations and topic administration."""
