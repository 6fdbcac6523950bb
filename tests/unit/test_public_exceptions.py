"""django_jobretry.exceptions exports every exception it defines: ``import *`` and the docs see each one."""

from __future__ import annotations

import inspect
from types import ModuleType, SimpleNamespace

from django_jobretry import exceptions


def unexported(module: ModuleType | SimpleNamespace) -> set[str]:
    """The exception classes ``module`` defines itself and leaves out of its ``__all__``."""
    name = getattr(module, "__name__", "")
    defined = {
        attr
        for attr, value in vars(module).items()
        if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == name
    }
    return defined - set(module.__all__)


def test_every_exception_defined_in_the_module_is_exported() -> None:
    assert unexported(exceptions) == set()


def test_negative_control_an_exception_left_out_of_all_is_named() -> None:
    missing = SimpleNamespace(**vars(exceptions))
    missing.__all__ = [name for name in exceptions.__all__ if name != "JobConflict"]
    assert unexported(missing) == {"JobConflict"}
