"""An expectation's kwargs read once per lookup, not once per key (Great Expectations 1.24).

GX's ``Expectation._get_runtime_kwargs`` and the methods it calls read
``self.configuration.kwargs`` inside a comprehension, once per domain, success and runtime
key, and ``configuration`` is a property that rebuilds the whole configuration each time:
a pydantic ``dict()`` of every field, value sets included. A validation asks for the kwargs
of each expectation several times, so at a large snapshot this rebuilding was a large
share of the snapshot suite (by cProfile of ``check_snapshot``) and as much of the release
suites.

The methods below are GX 1.24's own, with the configuration read once per call: the same
keys, defaults, precedence (runtime configuration over the expectation's kwargs over field
defaults) and warning, so every verdict and result is the same (``tests/test_gx_kwargs.py``
validates suites both ways and compares the results). They replace GX's only for the 1.24
line that they were copied from; any other version keeps its own code (:data:`APPLIED`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import great_expectations as gx
from great_expectations.expectations import expectation as _gx_expectation
from great_expectations.expectations.expectation import Expectation, parse_result_format

#: the GX releases whose methods these copy
_VERSIONS = ("1.24.",)

_log = logging.getLogger(_gx_expectation.__name__)  # GX's own logger, as in the original


def _kwarg(self: Expectation, kwargs: dict[str, Any], key: str, default: Any = None) -> Any:
    if key in kwargs:
        return kwargs[key]
    field = self.__fields__.get(key)
    if field is not None:
        return field.default if not field.required else default
    _log.warning(f'_get_success_kwarg called with key "{key}", but it is not a known field of {type(self).__name__}')
    return default


def _with_defaults(self: Expectation, kwargs: dict[str, Any], keys: Any) -> dict[str, Any]:
    return {key: kwargs.get(key, self._get_default_value(key)) for key in keys}


def _success_from(self: Expectation, kwargs: dict[str, Any]) -> dict[str, Any]:
    success = _with_defaults(self, kwargs, self.success_keys)
    success.update(_with_defaults(self, kwargs, self.domain_keys))
    return success


def _get_success_kwarg(self: Expectation, key: str, default: Any = None) -> Any:
    return _kwarg(self, self.configuration.kwargs, key, default)


def _get_domain_kwargs(self: Expectation) -> dict[str, Any]:
    # GX's check for missing domain keys cannot fail: the dict holds every domain key
    return _with_defaults(self, self.configuration.kwargs, self.domain_keys)


def _get_success_kwargs(self: Expectation) -> dict[str, Any]:
    return _success_from(self, self.configuration.kwargs)


def _get_runtime_kwargs(self: Expectation, runtime_configuration: dict[str, Any] | None = None) -> dict[str, Any]:
    runtime_configuration = runtime_configuration or {}
    kwargs = self.configuration.kwargs
    success_kwargs = _success_from(self, kwargs)
    runtime_kwargs = {key: runtime_configuration.get(key, _kwarg(self, kwargs, key)) for key in self.runtime_keys}
    runtime_kwargs.update(success_kwargs)
    runtime_kwargs["result_format"] = parse_result_format(runtime_kwargs["result_format"])
    return runtime_kwargs


_PATCHED: Mapping[str, Any] = MappingProxyType(
    {
        "_get_success_kwarg": _get_success_kwarg,
        "_get_domain_kwargs": _get_domain_kwargs,
        "_get_success_kwargs": _get_success_kwargs,
        "_get_runtime_kwargs": _get_runtime_kwargs,
    }
)

#: GX's own methods, for the tests that compare both
ORIGINAL: Mapping[str, Any] = MappingProxyType({name: getattr(Expectation, name) for name in _PATCHED})

#: whether the installed GX got the methods above
APPLIED = gx.__version__.startswith(_VERSIONS)

if APPLIED:
    for _name, _method in _PATCHED.items():
        setattr(Expectation, _name, _method)
