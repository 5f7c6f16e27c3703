"""Job handlers for benchmark workers: return at once, so the engine is what is measured."""


def noop(job):
    return None
