"""The Pauses page's add form: exactly one known queue or task, an optional reason and end.

Checked as the service checks them (services/holds.py), so a mistake is a
form error on its field and nothing is stored. A name neither declared nor
on any job (services/hold_names.py) is refused with the close names unless
"Not deployed yet" is ticked: a task or queue whose code comes later.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.utils import timezone

from django_jobretry.models import Pause
from django_jobretry.models.holds import REASON_MAX_LENGTH
from django_jobretry.services import holds

if TYPE_CHECKING:  # generic only in django-stubs, not at run time
    _PauseForm = forms.ModelForm[Pause]
else:
    _PauseForm = forms.ModelForm

#: What the form says instead of the Python keyword the service's message names.
UNDEPLOYED = "Tick “Not deployed yet” to pause it before it is deployed."


class PauseForm(_PauseForm):
    """Exactly one of queue and task, known unless ``undeployed``; an optional reason and end."""

    undeployed = forms.BooleanField(
        required=False,
        label="Not deployed yet",
        help_text="Pause this name although no code declares it and no job has it yet. "
        "Without this, such a name is refused as a likely typo.",
    )

    class Meta:
        model = Pause
        fields = ("queue_name", "task_name", "reason", "until")
        help_texts = {
            "queue_name": "Pause every task's jobs on this queue, or",
            "task_name": "pause this task's jobs (its registered name).",
            "until": "Optional: the pause ends by itself then. Without it, only a resume ends it.",
        }

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        try:
            where = holds.target(queue=data.get("queue_name") or None, task=data.get("task_name") or None)
        except holds.InvalidHold as exc:
            raise forms.ValidationError(str(exc)) from None
        if not data.get("undeployed"):
            try:
                holds.check_known(where)
            except holds.UnknownName as exc:
                self.add_error(where.column, f"{exc.problem} {UNDEPLOYED}")
        until = data.get("until")
        if until is not None and until <= timezone.now():
            self.add_error("until", f"{until.isoformat()} has passed: give a later time, or none.")
        else:
            try:
                holds.check_until(until)
            except holds.InvalidHold as exc:
                self.add_error("until", str(exc))
        if len(data.get("reason") or "") > REASON_MAX_LENGTH:
            self.add_error("reason", f"at most {REASON_MAX_LENGTH} characters are kept")
        return data
