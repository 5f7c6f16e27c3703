"""The engine: deterministic processors per (value type, intent) and the Kafka shell around them."""
