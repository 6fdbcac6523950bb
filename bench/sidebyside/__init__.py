"""Side by side: our figures beside django-q2's, procrastinate's and django-tasks-db's, in one run.

    make bench-peers                 # embedded PostgreSQL, throwaway; installs the `bench` extra
    .venv/bin/python -m bench.sidebyside --help

``python -m bench.sidebyside`` (``__main__.py``) creates one scratch database
per tool on DATABASE_URL's server and, round after round, runs one child
process per tool (``bench/sidebyside/<tool>.py``) that measures every
selected workload on that tool's database and prints its figures as JSON;
``table.py`` prints the medians, ranges and ratios as one Markdown table.
The package is also a tiny Django app (``jobs.py``: our jobs of the bench).
"""
