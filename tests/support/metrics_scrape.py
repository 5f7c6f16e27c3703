"""Scrape a `/metrics` endpoint over HTTP and read values from it, as Prometheus would."""

from __future__ import annotations

import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def get(port: int, path: str) -> tuple[int, str]:
    """(status, body) of GET `path` on localhost:`port`."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class Scrape:
    """One scrape: its samples by name (a histogram's `_count`, `_bucket`... each by its own)."""

    def __init__(self, text: str) -> None:
        self.families = {f.name: f for f in text_string_to_metric_families(text)}
        self.samples = [s for f in self.families.values() for s in f.samples]

    @classmethod
    def of(cls, port: int) -> Scrape:
        status, body = get(port, "/metrics")
        assert status == 200, (status, body)
        return cls(body)

    def value(self, name: str, **labels: str) -> float:
        """The sum of `name`'s samples whose labels include `labels` (0 when there are none)."""
        return sum(s.value for s in self.samples
                   if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))

    def labels(self, name: str, label: str) -> set[str]:
        """The values `label` takes among `name`'s samples."""
        return {s.labels[label] for s in self.samples if s.name == name and label in s.labels}
