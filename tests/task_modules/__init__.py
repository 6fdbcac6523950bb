"""Modules for tests/integration/conf/test_task_modules.py.

Tasks where start-up does or does not import them.
"""
