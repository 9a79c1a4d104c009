"""The record in which the report lists a figure (docs/reports.md).

No measure module (:mod:`anonymizer.measures`) builds one: they return numbers, and
:mod:`serialpub.report.wording` names, explains and cites them in this record. The
manifest's ``measures`` list (:func:`serialpub.report.render.measure_records`) and the
report pages are written from it.
"""

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
