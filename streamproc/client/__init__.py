"""The Python client: send commands, read events."""

from streamproc.client.activities import ActivityClient, ActivityHandle
from streamproc.client.client import Client
from streamproc.client.events import EventReader

__all__ = ["Client", "EventReader", "ActivityClient", "ActivityHandle"]
