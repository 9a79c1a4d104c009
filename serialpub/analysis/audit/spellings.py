"""Sensitive values spelled two ways (serialpub.io.spelling; docs/configuration.md,
"Spelling of sensitive values").

A published value that is another spelling of a protected value (``HIV`` beside a
protected ``hiv``) is the same sensitive fact about a person: the audit counts its records
as the protected value's, and names every such spelling as a finding, so a release in which
a protected value escaped under another spelling never passes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from serialpub.io.spelling import RULE, same_value_pairs, spelling_key


def value_codes(values: Sequence[str], labels: Sequence[str]) -> npt.NDArray[np.int64]:
    """Index into ``values`` (the protected values) of the value each label spells, -1 for
    a label that spells none; two spellings of one value both index its first spelling.
    Shape (len(labels),)."""
    first: dict[str, int] = {}
    for i, v in enumerate(values):
        first.setdefault(spelling_key(v), i)
    return np.array([first.get(spelling_key(str(u)), -1) for u in labels], dtype=np.int64)


def spelling_findings(where: str, values: Sequence[str], protected: Sequence[str], labels: Sequence[str]) -> list[str]:
    """One line per protected value of this release spelled twice, and per published label
    that is not a protected value as written but spells one (``values``: every value
    protected in the series, ``protected``: this release's, ``labels``: its published ones)."""
    out = [
        f"{where}: protected values {a!r} and {b!r} are one value spelled two ways ({RULE}); "
        f"the audit counts them as one"
        for a, b in same_value_pairs(protected)
    ]
    exact = set(values)
    codes = value_codes(values, labels)
    for label, code in zip(labels, codes, strict=True):
        if code >= 0 and str(label) not in exact:
            out.append(
                f"{where}: published value {str(label)!r} is another spelling of protected value "
                f"{values[int(code)]!r} ({RULE}); its records are counted as {values[int(code)]!r}"
            )
    return out
