"""The chapters of `manage.py demo` after its first summary, one module each.

Not in management/commands/, where Django would take each module for a command.
"""
