"""Whether a call's arguments fit a task function's signature, found without calling it.

A call the function cannot take would fail every attempt with a
``TypeError``, so enqueue refuses it (:func:`check_call`) and stores
nothing. The worker binds a job's stored arguments before the call
(:func:`mismatch`): a signature changed since the enqueue is then told
apart from a ``TypeError`` raised inside the function, which the policy
classifies as any other error.

``inspect.signature`` is read once per function and kept; each enqueue
costs one ``Signature.bind``. The messages name parameters and counts,
never argument values.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django_jobretry.exceptions import InvalidArguments

#: How many functions keep their signature (least recently used first out).
CACHED_SIGNATURES = 1024


class _Elided:
    """Stands for a parameter's default in messages: defaults are code, maybe long, never needed there."""

    def __repr__(self) -> str:
        return "..."


_ELIDED = _Elided()


def call_signature(func: Callable[..., Any], *, takes_context: bool = False) -> inspect.Signature | None:
    """How ``func`` is called with a job's arguments; None when Python cannot read its signature.

    ``takes_context``: a django.tasks task's first parameter is the context
    the worker passes, so the arguments bind to the parameters after it.
    """
    try:
        return _cached_signature(func, takes_context)
    except TypeError:  # an unhashable callable: read each time
        return _signature(func, takes_context)


@functools.lru_cache(maxsize=CACHED_SIGNATURES)
def _cached_signature(func: Callable[..., Any], takes_context: bool) -> inspect.Signature | None:
    return _signature(func, takes_context)


def _signature(func: Callable[..., Any], takes_context: bool) -> inspect.Signature | None:
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):  # some builtins have no signature Python can read: not checked
        return None
    if takes_context:
        signature = signature.replace(parameters=list(signature.parameters.values())[1:])
    return signature


def mismatch(
    func: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    takes_context: bool = False,
) -> str | None:
    """Why ``func`` cannot be called with ``args`` and ``kwargs`` (inspect's words); None when it can."""
    signature = call_signature(func, takes_context=takes_context)
    if signature is None:
        return None
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        return f"{exc} ({_given(args, kwargs)}; the signature is {shown(func, signature)})"
    return None


def check_call(
    task_name: str,
    func: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    takes_context: bool = False,
) -> None:
    """Refuse, with :class:`InvalidArguments`, a call of task ``task_name`` its function cannot take."""
    why = mismatch(func, args, kwargs, takes_context=takes_context)
    if why is not None:
        raise InvalidArguments(f"{task_name}() cannot take these arguments: {why}")


def bound_arguments(
    func: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any], *, takes_context: bool = False
) -> dict[str, Any]:
    """A call's arguments by parameter name, defaults applied: what keys are made of (limits, uniqueness).

    The call was checked already (:func:`check_call`); a context-taking
    task's first parameter is its context, bound to None here.
    """
    bound = inspect.signature(func).bind(*((None, *args) if takes_context else args), **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def untaken(func: Callable[..., Any], names: Sequence[str], *, takes_context: bool = False) -> list[str]:
    """The ``names`` that ``func`` takes no parameter for (none when it takes ``**kwargs``), in order."""
    parameters = list(inspect.signature(func).parameters.values())[1 if takes_context else 0 :]
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return []
    taken = {p.name for p in parameters if p.kind is not inspect.Parameter.VAR_POSITIONAL}
    return [name for name in names if name not in taken]


def shown(func: Callable[..., Any], signature: inspect.Signature) -> str:
    """``push_order(order_id, *, colour=...)``: the parameters, without annotations or default values."""
    parameters = [
        parameter.replace(
            annotation=inspect.Parameter.empty,
            default=inspect.Parameter.empty if parameter.default is inspect.Parameter.empty else _ELIDED,
        )
        for parameter in signature.parameters.values()
    ]
    plain = signature.replace(parameters=parameters, return_annotation=inspect.Signature.empty)
    return f"{getattr(func, '__name__', 'function')}{plain}"


def _given(args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    positional = f"{len(args)} positional argument{'' if len(args) == 1 else 's'}"
    if not kwargs:
        return f"{positional} given"
    names = ", ".join(repr(name) for name in kwargs)
    return f"{positional} and keyword argument{'' if len(kwargs) == 1 else 's'} {names} given"
