"""One processor per job command intent, with Zeebe's semantics (SEMANTICS.md section 10).

Each processor validates the command against the partition state and either writes the
event(s) that follow and the state they imply, or a rejection with a reason. A timeout
never consumes a retry (Zeebe's rule for jobs); FAIL sets retries to the value sent.

Wherever a job becomes startable (CREATE, a FAIL without backoff, TIME_OUT,
RECUR_AFTER_BACKOFF, UPDATE_RETRIES resolving an incident) it is pushed to a worker's job
stream with free credit, if its queue has one (`_dispatch`), else published on its task
queue; wherever a pushed attempt ends (COMPLETE, FAIL, TIME_OUT, CANCEL) its credit comes
back (`JobStreams.release`).
"""

from __future__ import annotations

from streamproc.engine.processing import ProcessingContext, Processor
from streamproc.engine.validation import check_json
from streamproc.protocol.records import IncidentIntent, JobIntent, Record, RejectionType, ValueType
from streamproc.protocol.topics import check_task_queue
from streamproc.state.jobs import Job, JobState

JOB = ValueType.JOB
NO_RETRIES_MESSAGE = "No more retries left."


def create(cmd: Record, ctx: ProcessingContext) -> None:
    v = cmd.value
    problem = (check_task_queue(v["type"])
               or check_json(v["payload"], "payload", ctx.limits.max_payload_bytes))
    if problem is None and not 0 <= v["retries"] <= ctx.limits.max_retries:
        problem = f"retries must be in [0, {ctx.limits.max_retries}], got {v['retries']}"
    if problem is None and not 0 < v["timeout_ms"] <= ctx.limits.max_timeout_ms:
        problem = f"timeout_ms must be in [1, {ctx.limits.max_timeout_ms}], got {v['timeout_ms']}"
    problem = problem or ctx.admit_task_queue(v["type"])
    if problem:
        ctx.out.reject(cmd, RejectionType.INVALID_ARGUMENT, f"Expected to create a job, but {problem}")
        return
    key = ctx.keys.next_key()
    job = Job.created(v)
    ctx.jobs.put(key, job)
    value = job.record()  # the writer copies it for each record
    ctx.out.event(JOB, JobIntent.CREATED, key, value)
    _dispatch(key, job, ctx, value)


def _current(cmd: Record, ctx: ProcessingContext, verb: str) -> Job | None:
    """The job the command names, or None after writing the NOT_FOUND rejection."""
    job = ctx.jobs.get(cmd.key) if cmd.key >= 0 else None
    if job is None:
        ctx.out.reject(cmd, RejectionType.NOT_FOUND,
                       f"Expected to {verb} job with key '{cmd.key}', but no such job was found")
    return job


def _attempt_problem(cmd: Record, job: Job, verb: str, wanted: JobState) -> str | None:
    asked = cmd.value["attempt"]
    if asked != job.attempt:
        return (f"Expected to {verb} job with key '{cmd.key}' at attempt {asked}, but that attempt "
                f"is over: the job is {job.state} at attempt {job.attempt}")
    if job.state is not wanted:
        return (f"Expected to {verb} job with key '{cmd.key}' at attempt {asked}, but it is "
                f"{job.state}, not {wanted}")
    return None


def start(cmd: Record, ctx: ProcessingContext) -> None:
    job = _current(cmd, ctx, "start")
    if job is None:
        return
    if job.is_repeated_start(cmd.value["attempt"], cmd.request_id):
        # A worker that got no answer sends its START again with the same request id
        # (a broker outage, an engine takeover): it is told again that the start is its.
        ctx.out.reply(JOB, JobIntent.STARTED, cmd.key, job.record())
        return
    problem = _attempt_problem(cmd, job, "start", JobState.ACTIVATABLE)
    if problem:
        ctx.out.reject(cmd, RejectionType.INVALID_STATE, problem)
        return
    ctx.jobs.start(cmd.key, job, cmd.value["worker"], ctx.now_ms + job.timeout_ms, cmd.request_id)
    ctx.out.event(JOB, JobIntent.STARTED, cmd.key, job.record())


def complete(cmd: Record, ctx: ProcessingContext) -> None:
    job = _current(cmd, ctx, "complete")
    if job is None:
        return
    problem = _attempt_problem(cmd, job, "complete", JobState.STARTED)
    result = cmd.value["result"] if cmd.value["result"] is not None else "null"
    problem = problem or check_json(result, "result", ctx.limits.max_payload_bytes)
    if problem:
        ctx.out.reject(cmd, RejectionType.INVALID_STATE, problem)
        return
    ctx.job_streams.release(job)
    ctx.jobs.remove(cmd.key, job)
    job.result = result
    ctx.out.event(JOB, JobIntent.COMPLETED, cmd.key, job.record(closed_as=JobIntent.COMPLETED))


def fail(cmd: Record, ctx: ProcessingContext) -> None:
    job = _current(cmd, ctx, "fail")
    if job is None:
        return
    v = cmd.value
    problem = _attempt_problem(cmd, job, "fail", JobState.STARTED)
    if problem is None and v["retries"] > ctx.limits.max_retries:
        problem = f"retries must be at most {ctx.limits.max_retries}, got {v['retries']}"
    if problem:
        ctx.out.reject(cmd, RejectionType.INVALID_STATE, problem)
        return
    ctx.job_streams.release(job)
    job.retries, job.error_message, job.retry_backoff_ms = \
        v["retries"], v["error_message"][:8192], v["retry_backoff_ms"]
    if v["retries"] > 0 and v["retry_backoff_ms"] > 0:
        ctx.jobs.fail(cmd.key, job, recur_at_ms=ctx.now_ms + v["retry_backoff_ms"])
        ctx.out.event(JOB, JobIntent.FAILED, cmd.key, job.record())
    elif v["retries"] > 0:
        ctx.jobs.fail(cmd.key, job, recur_at_ms=-1)
        ctx.out.event(JOB, JobIntent.FAILED, cmd.key, job.record())
        _republish(cmd.key, job, ctx)
    else:
        incident_key = ctx.keys.next_key()
        job.incident_key = incident_key
        ctx.jobs.fail(cmd.key, job, recur_at_ms=-1)
        ctx.out.event(JOB, JobIntent.FAILED, cmd.key, job.record())
        incident = {"error_type": "JOB_NO_RETRIES", "job_key": cmd.key, "job_type": job.type,
                    "error_message": job.error_message or NO_RETRIES_MESSAGE}
        ctx.incidents.open(incident_key, incident)
        ctx.out.event(ValueType.INCIDENT, IncidentIntent.CREATED, incident_key, incident)


def _republish(key: int, job: Job, ctx: ProcessingContext, avoid: str | None = None) -> None:
    ctx.jobs.make_activatable(key, job, next_attempt=True)
    _dispatch(key, job, ctx, avoid=avoid)


def _dispatch(key: int, job: Job, ctx: ProcessingContext, value: dict | None = None,
              avoid: str | None = None) -> None:
    """Job `key` (ACTIVATABLE; `value`: its record, if made already) is startable: pushed to the job stream of
    its queue with the most free credit (not `avoid` if another has some), STARTED in this
    command and sent to the stream's replies partition under request id
    <stream>/<key>/<attempt>; when no stream has free credit, published on its task queue."""
    stream = ctx.job_streams.pick(job.type, key, ctx.now_ms, avoid)
    if stream is None:
        ctx.out.task(job.type, key, value if value is not None else job.record())
        return
    ctx.jobs.start(key, job, stream.worker, ctx.now_ms + job.timeout_ms, stream=stream.stream_id)
    ctx.job_streams.take(stream)
    started = job.record()
    # The command's caller (a CREATE's client) waits for its own answer, not for this one.
    ctx.out.event(JOB, JobIntent.STARTED, key, started, reply=False)
    ctx.out.answer(stream.reply_partition, f"{stream.stream_id}/{key}/{job.attempt}", JOB, JobIntent.STARTED,
                   key, started)


def _fire_due_date(cmd: Record, ctx: ProcessingContext, *, verb: str, state: JobState,
                   field: str, event: str) -> None:
    """TIME_OUT and RECUR_AFTER_BACKOFF come from the due-date checker, maybe twice or late:
    accept only if the job is still in `state` with the due date the command names, passed."""
    job = ctx.jobs.get(cmd.key)
    due = cmd.value[field]
    prefix = f"Expected to {verb} job with key '{cmd.key}' due at {due}, but"
    if job is None:
        reason = f"{prefix} no such job was found"
    elif job.state is not state:
        reason = f"{prefix} it is {job.state}"
    elif getattr(job, field) != due:
        reason = f"{prefix} its {field} is now {getattr(job, field)}"
    elif not due < ctx.now_ms:
        reason = f"{prefix} that time has not passed (now {ctx.now_ms})"
    else:
        pushed_to = ctx.job_streams.release(job)  # a timed out attempt's: pushed elsewhere if possible
        ctx.out.event(JOB, event, cmd.key, job.record())
        _republish(cmd.key, job, ctx, avoid=pushed_to)
        return
    if job is None or getattr(job, field) != due:
        # The due-date entry that made the checker send this says what the job does not (left
        # by an engine from before on a rollback): kept, it would be sent again at every pass.
        ctx.jobs.forget_due_date(field, due, cmd.key)
    ctx.out.reject(cmd, RejectionType.NOT_FOUND if job is None else RejectionType.INVALID_STATE, reason)


def time_out(cmd: Record, ctx: ProcessingContext) -> None:
    _fire_due_date(cmd, ctx, verb="time out started", state=JobState.STARTED,
                   field="deadline_ms", event=JobIntent.TIMED_OUT)


def recur_after_backoff(cmd: Record, ctx: ProcessingContext) -> None:
    _fire_due_date(cmd, ctx, verb="recur failed", state=JobState.FAILED,
                   field="recur_at_ms", event=JobIntent.RECURRED_AFTER_BACKOFF)


def update_retries(cmd: Record, ctx: ProcessingContext) -> None:
    """Give a job retries again; a job in an incident is resolved and published again."""
    retries = cmd.value["retries"]
    if not 0 < retries <= ctx.limits.max_retries:
        ctx.out.reject(cmd, RejectionType.INVALID_ARGUMENT,
                       f"Expected to update retries of job with key '{cmd.key}' to a value in "
                       f"[1, {ctx.limits.max_retries}], got {retries}")
        return
    job = _current(cmd, ctx, "update retries of")
    if job is None:
        return
    job.retries = retries
    incident_key, job.incident_key = job.incident_key, None
    ctx.jobs.put(cmd.key, job)
    ctx.out.event(JOB, JobIntent.RETRIES_UPDATED, cmd.key, job.record())
    if incident_key is not None:
        incident = ctx.incidents.get(incident_key)
        ctx.incidents.resolve(incident_key)
        ctx.out.event(ValueType.INCIDENT, IncidentIntent.RESOLVED, incident_key, incident or {})
        _republish(cmd.key, job, ctx)


def cancel(cmd: Record, ctx: ProcessingContext) -> None:
    job = _current(cmd, ctx, "cancel")
    if job is None:
        return
    incident_key = job.incident_key
    if incident_key is not None:
        incident = ctx.incidents.get(incident_key)
        ctx.incidents.resolve(incident_key)
        ctx.out.event(ValueType.INCIDENT, IncidentIntent.RESOLVED, incident_key, incident or {})
    ctx.job_streams.release(job)
    ctx.jobs.remove(cmd.key, job)
    ctx.out.event(JOB, JobIntent.CANCELED, cmd.key, job.record(closed_as=JobIntent.CANCELED))


JOB_PROCESSORS: dict[str, Processor] = {
    JobIntent.CREATE: create,
    JobIntent.START: start,
    JobIntent.COMPLETE: complete,
    JobIntent.FAIL: fail,
    JobIntent.TIME_OUT: time_out,
    JobIntent.RECUR_AFTER_BACKOFF: recur_after_backoff,
    JobIntent.UPDATE_RETRIES: update_retries,
    JobIntent.CANCEL: cancel,
}
