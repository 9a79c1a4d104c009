"""How the report names, explains and cites the measures (docs/reports.md).

The measure modules (:mod:`anonymizer.measures`) return numbers only; each module here turns one
family's figures into the report's :class:`~serialpub.report.measure.Measure` records: the
name in the field's terms, the unit, the source (paper, section, equation) and a note on how to
read the figure, its parameters, or why it was not computed. The records keep the report's order
within a family; :mod:`serialpub.report.privacy` and :mod:`serialpub.report.utility` put the
families together.

- :mod:`.guarantee`: the global guarantee's figures (paper 004).
- :mod:`.diversity`: k-anonymity and ℓ-diversity (paper 000 §3.2–3.3).
- :mod:`.closeness`: t-closeness (paper 000 §3.4; Li et al.).
- :mod:`.categorical`: the thesis's categorical controls (paper 000 §3.5).
- :mod:`.personalized`: Xiao & Tao's personalized breach probability (paper 001).
- :mod:`.disclosure`: Malik's disclosure risk of a release (paper 002).
- :mod:`.channel`: Askari et al.'s information-theoretic privacy and utility (paper 003).
- :mod:`.utility`: the query error and the information-loss measures.

Dilution. Under register dilution n_j counts a group's register candidates; under presence
dilution it counts the group's present records, and the functions given ``presence=True`` say
so in place of the candidates.
"""

from __future__ import annotations

from serialpub.report.measure import Measure

#: The citation of paper 000, shared by the diversity, closeness and categorical wording.
HSU = "Hsu 2008 (paper 000)"


def not_computed(name: str, unit: str, source: str, reason: str, family: str = "privacy") -> Measure:
    """A measure left out, with the reason (typically the instance exceeds a stated size limit)."""
    return Measure(name=name, value=None, unit=unit, source=source, note=reason, family=family)
