"""Job handlers that worker processes of the tests load by name."""


def double(job):
    return {"n": job.payload["n"] * 2}
