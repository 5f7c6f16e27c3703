"""Pure Temporal semantics: retry policies, activity and workflow timeouts, id policies, histories.

No I/O and no clock reads: every function takes the time it needs as an argument.
Durations are ``datetime.timedelta``; a raw number says its unit in its name (``_ns``).
See ``SEMANTICS.md`` sections 1, 2, 8 and 9 for the behaviour these functions reproduce.
"""

# Each module's public names (its __all__) are the package's: import from the module
# that owns a concept, or from here for short.
from streamproc.semantics.activity_attempts import *  # noqa: F401,F403
from streamproc.semantics.activity_timeline import *  # noqa: F401,F403
from streamproc.semantics.activity_timeouts import *  # noqa: F401,F403
from streamproc.semantics.backoff import *  # noqa: F401,F403
from streamproc.semantics.durations import *  # noqa: F401,F403
from streamproc.semantics.enums import *  # noqa: F401,F403
from streamproc.semantics.errors import *  # noqa: F401,F403
from streamproc.semantics.failures import *  # noqa: F401,F403
from streamproc.semantics.local_activity_retry import *  # noqa: F401,F403
from streamproc.semantics.retry import *  # noqa: F401,F403
from streamproc.semantics.schedule_calendar import *  # noqa: F401,F403
from streamproc.semantics.schedule_cron import *  # noqa: F401,F403
from streamproc.semantics.schedule_interval import *  # noqa: F401,F403
from streamproc.semantics.schedule_overlap import *  # noqa: F401,F403
from streamproc.semantics.schedule_spec import *  # noqa: F401,F403
from streamproc.semantics.swf import *  # noqa: F401,F403
from streamproc.semantics.workflow_events import *  # noqa: F401,F403
from streamproc.semantics.workflow_history import *  # noqa: F401,F403
from streamproc.semantics.workflow_history_limits import *  # noqa: F401,F403
from streamproc.semantics.workflow_ids import *  # noqa: F401,F403
from streamproc.semantics.workflow_retry import *  # noqa: F401,F403
from streamproc.semantics.workflow_timeout_outcomes import *  # noqa: F401,F403
from streamproc.semantics.workflow_timeouts import *  # noqa: F401,F403
from streamproc.semantics import (  # noqa: E402
    activity_attempts, activity_timeline, activity_timeouts, backoff, durations, enums, errors, failures,
    local_activity_retry, retry, schedule_calendar, schedule_cron, schedule_interval, schedule_overlap, schedule_spec, swf,
    workflow_events, workflow_history, workflow_history_limits, workflow_ids, workflow_retry,
    workflow_timeout_outcomes, workflow_timeouts)

_MODULES = (
    activity_attempts, activity_timeline, activity_timeouts, backoff, durations, enums, errors, failures,
    local_activity_retry, retry, schedule_calendar, schedule_cron, schedule_interval, schedule_overlap, schedule_spec, swf,
    workflow_events, workflow_history, workflow_history_limits, workflow_ids, workflow_retry,
    workflow_timeout_outcomes, workflow_timeouts)
__all__ = list(dict.fromkeys(name for module in _MODULES for name in module.__all__))
