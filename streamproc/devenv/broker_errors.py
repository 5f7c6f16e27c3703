"""BrokerError: the one exception the local broker raises, with the broker's own words attached."""

from __future__ import annotations


class BrokerError(RuntimeError):
    """Something went wrong managing the local broker; ``log_tail`` holds the broker's last log lines."""

    def __init__(self, message: str, log_tail: str = "", label: str = "last broker log lines") -> None:
        self.message = message
        self.log_tail = log_tail
        text = message
        if log_tail.strip():
            text += f"\n--- {label} ---\n" + log_tail.rstrip()
        super().__init__(text)
