"""What the engine exports for others to read: the events topic in the Schema Registry wire
format, with the schema registered once per subject (`schema_registry.py`)."""
