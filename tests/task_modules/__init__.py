"""Modules for tests/integration/test_task_modules.py: tasks where start-up does or does not import them."""
