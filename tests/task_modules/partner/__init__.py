"""An installed app whose tasks.py names a queue that TASKS does not list (check E025)."""
