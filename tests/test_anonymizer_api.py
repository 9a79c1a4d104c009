"""The anonymizer's public API (anonymizer/__init__.py): every name of ``__all__`` is
importable from the package, and importing the package alone loads no numerical library."""

from __future__ import annotations

import subprocess
import sys

import pytest

import anonymizer


def test_every_public_name_resolves_to_its_module() -> None:
    for name in anonymizer.__all__:
        value = getattr(anonymizer, name)
        assert value.__name__ == name and value.__module__.startswith("anonymizer."), name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = anonymizer.nope  # type: ignore[attr-defined]


def test_importing_the_package_or_its_settings_loads_no_numpy() -> None:
    code = "import sys, anonymizer, anonymizer.settings; print('numpy' in sys.modules, 'pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
