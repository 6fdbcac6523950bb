"""What a job's function returned, kept as its attempt ends (docs/results.md).

The runner thread turns the value into JSON text here; the text rides on the
``Succeeded`` outcome into the statement that records the success
(statements.SUCCEEDED writes ``return_value``), so keeping a result costs no
statement of its own. Kept are:

- the value of an ``@job(keep_result=True)``, or of a job whose policy has
  ``keep_result`` (registry.keeps_result: the task's own option wins);
- a workflow step's value, whenever it can be: a child may read it
  (flows/results.py).

A django.tasks task's value arrives kept already (``Kept``,
contrib/django_tasks/runs.py) and does not pass here.

A value that must be kept and cannot be (not JSON, past ``MAX_ARGS_BYTES`` or
``MAX_ARGS_DEPTH``: the arguments' rules, validation.check_result) fails the
attempt with :class:`UnstorableResult`, fatal: the function would return the
same kind of value again. A step's value that no child reads is dropped
instead. The messages name the task, the type or the size and the limit,
never the value, which may be as personal as arguments; nor is it logged.
"""

from __future__ import annotations

from typing import Any

from django_jobretry.conf import jobretry_settings
from django_jobretry.exceptions import InvalidJob, UnstorableResult
from django_jobretry.flows.results import read_by_a_child
from django_jobretry.jobs.claimed import ClaimedJob
from django_jobretry.registry import keeps_result
from django_jobretry.validation import check_result

#: What a value that is not JSON should be instead.
PLAIN = "return plain data (str, int, float, bool, None, list, dict)"


def kept_result(job: ClaimedJob, value: Any) -> str | None:
    """``value`` as the JSON text the success stores, None when it is not kept, or UnstorableResult."""
    keep = keeps_result(job.task_name, job.policy_name)
    if not keep and job.flow_step_id is None:
        return None
    try:
        return check_result(
            job.task_name,
            value,
            max_bytes=jobretry_settings.max_args_bytes,
            max_depth=jobretry_settings.max_args_depth,
        )
    except (InvalidJob, TypeError, ValueError, RecursionError) as exc:
        # An InvalidJob names the type or the size and the limit, never the value; of an encoder's
        # error, the class only: its text may quote the value.
        why = str(exc) if isinstance(exc, InvalidJob) else f"it is not JSON ({type(exc).__name__}); {PLAIN}"
    if keep:
        raise UnstorableResult(
            f"task {job.task_name!r} keeps its result (keep_result=True), which cannot be kept: {why}"
        )
    if job.flow_step_id is not None and read_by_a_child(job.flow_step_id):
        raise UnstorableResult(
            f"a child step reads the result of {job.task_name!r} (results=True), which cannot be kept: {why}"
        )
    return None
