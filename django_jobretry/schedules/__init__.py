"""Periodic schedules, in one folder: declared in code and settings, run by every worker, with no leader.

- ``declare``: what a declaration is, and the job its runs are (layer 2);
- ``checks``: `manage.py check` on the declarations, E040-E043 (layer 2);
- ``rows``: every statement on a schedule's row, and each write besides a
  look's: declaring, a run's success, an operator's pause, resume, run now;
- ``runs``: a look, turning due slots into runs, and the heartbeat duty
  whose thread looks (layer 4: it is the worker's);
- ``status``: where each schedule stands, and its metrics;
- ``admin``, ``admin_actions``, ``cli``: the admin page and its actions,
  the dashboard's panel, `manage.py schedules` and `jobstatus`' section.

The Schedule model stays with the others (models/schedule.py); features.py
names the parts each face uses. docs/decisions/0007 says why no leader.
"""
