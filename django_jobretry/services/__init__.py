"""The four import paths the docs showed before the state machine and the capabilities had rooms.

``django_jobretry.services.holds``, ``.repairs``, ``.failure_groups`` and ``.cancel`` were on
docs/outages.md, docs/dead-letters.md and docs/worker.md; code a team wrote from those pages keeps
working, because each name is the module that now does the work. The docs show the new paths;
nothing else lives here.
"""

import sys

import django_jobretry.deadletters.repair as repairs  # repair(), digest()
import django_jobretry.deadletters.search as failure_groups  # groups()
import django_jobretry.holds.pauses as holds  # pause(), resume()
import django_jobretry.jobs.recovery as cancel  # cancel_jobs()

__all__ = ["cancel", "failure_groups", "holds", "repairs"]

for _former in __all__:
    sys.modules[f"{__name__}.{_former}"] = globals()[_former]
