"""The record every measure module returns to the report."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Measure:
    """One figure of the report.

    Attributes:
        name: what is measured, in the field's terms (e.g. ``"entropy ℓ-diversity"``).
        value: the figure, or None when it was not computed (``note`` says why).
        unit: how to read ``value`` (``"records"``, ``"bits"``, ``"fraction"``, ``"ℓ"``, ...).
        source: paper, section and equation the definition follows.
        note: how to read it, the parameters used, or why it was not computed.
        family: ``"privacy"`` or ``"utility"``.
    """

    name: str
    value: float | None
    unit: str
    source: str
    note: str = ""
    family: str = "privacy"

    @property
    def computed(self) -> bool:
        return self.value is not None


def not_computed(name: str, unit: str, source: str, reason: str, family: str = "privacy") -> Measure:
    """A measure left out, with the reason (typically the instance exceeds a stated size limit)."""
    return Measure(name=name, value=None, unit=unit, source=source, note=reason, family=family)
