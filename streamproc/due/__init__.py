"""Due-date checkers: turn due dates in state into TIME_OUT / trigger commands on the log."""
