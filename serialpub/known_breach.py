"""Models with a known breach and their acknowledgement (docs/threat-model.md, "Models
with a known breach").

Two settings choose a model whose guarantee an adversary is known to break:

- ``parts``: the search's split decisions read each part's own counts
  (``partition_model: parts``, and ``algorithm: bottomup``, whose cut search reads every
  cell's counts). The partition is then evidence, and an adversary who learns the
  QI-value association from the published releases and the register pushes pairs above 1/ℓ.
- ``paper``: paper 004's published-count suppression model (``suppression_model: paper``):
  an adversary who knows the algorithm infers what value-selective suppression removed.

A configuration choosing either must name it in ``accept_known_breach``; every manifest
of a release made under it records the acknowledgement (``accepted_known_breach``), and
the release report, the sign-off prompt and the audit state the risk.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class KnownBreach(StrEnum):
    """A model whose guarantee a known attack breaks (its setting's spelling)."""

    PARTS = "parts"  # split decisions read unpublished part counts: the partition is evidence
    PAPER = "paper"  # paper 004's suppression model: suppressed records are not charged


#: what each breach lets an adversary do, one sentence each (report, prompt, audit)
RISK = {
    KnownBreach.PARTS: (
        "partition model 'parts': the split decisions read counts the release does not publish, so the "
        "partition is evidence; an adversary who learns the QI-value association from the published releases "
        "and the register pushed (individual, value) pairs above 1/ℓ on the demo"
    ),
    KnownBreach.PAPER: (
        "suppression model 'paper': suppressed records are not charged, and an adversary who knows the "
        "algorithm infers what value-selective suppression removed"
    ),
}


def announcement(model: KnownBreach, automatic: bool = False) -> str:
    """The line the command line and the Airflow task log print for a release made under
    ``model``: the acknowledgement and its risk, and, for an automatic approval
    (``sign_off.auto_approve``), that no person read it before publication."""
    what = "approved automatically (sign_off.auto_approve) with a known breach" if automatic else "known breach"
    return (
        f"{what}, accepted in the configuration (accept_known_breach: {model}): {RISK[model]}; "
        "the figures above hold only within this model (docs/threat-model.md)"
    )


def taken(suppression_model: str | None, algorithm: str | None, partition_model: str | None) -> list[KnownBreach]:
    """The breachable models a configuration chooses, in :class:`KnownBreach` order.

    Args:
        suppression_model, algorithm, partition_model: the settings as spelled; ``partition_model``
            None means the algorithm's own (top-down: ``published``, bottom-up: ``parts``).
    """
    parts = partition_model == KnownBreach.PARTS or (partition_model is None and algorithm == "bottomup")
    return [b for b, on in ((KnownBreach.PARTS, parts), (KnownBreach.PAPER, suppression_model == "paper")) if on]


def recorded(
    suppression_model: str | None, algorithm: str | None, partition_model: str | None, imported: bool
) -> list[KnownBreach]:
    """The breachable models a published manifest shows its release was made under.

    A release made before a setting existed records none of it: it used the bottom-up
    search (cells' counts) and the paper's suppression model. An imported release was made
    by another tool (its search unknown); it is under the paper's model when the import
    recorded it so (records suppressed).
    """
    if not imported and algorithm is None and partition_model is None:
        algorithm = "bottomup"
    return taken(suppression_model or ("paper" if not imported else None), algorithm, partition_model)


def acknowledgement_problem(
    accepted: Iterable[str], suppression_model: str | None, algorithm: str | None, partition_model: str | None
) -> str | None:
    """Why ``accept_known_breach`` does not match the models chosen, in one line, or None.

    Every breachable model chosen must be acknowledged, and nothing else: an acknowledgement
    of a model not in use would be recorded in every manifest as a risk not taken.
    """
    accepted = [str(a) for a in accepted]
    chosen = taken(suppression_model, algorithm, partition_model)
    twice = sorted({a for a in accepted if accepted.count(a) > 1})
    if twice:
        return f"lists {', '.join(map(repr, twice))} twice; keep one"
    for breach in chosen:
        if breach in accepted:
            continue
        if breach is KnownBreach.PAPER:
            which, instead = "suppression_model 'paper'", "suppression_model: mechanism"
        elif partition_model is None:
            which = "algorithm 'bottomup' (it reads its cells' counts, as parts does)"
            instead = "algorithm: topdown"
        else:
            which, instead = "partition_model 'parts'", "partition_model: published"
        return (
            f"{which} has a known breach (docs/threat-model.md); acknowledge it with "
            f"accept_known_breach: [{', '.join(chosen)}], or use {instead}"
        )
    stale = [a for a in accepted if a not in chosen]
    if stale:
        return (
            f"acknowledges {', '.join(map(repr, stale))}, a model this configuration does not use "
            "(every manifest would record the risk); remove it"
        )
    return None


def release_span(releases: Iterable[int]) -> str:
    """Every release number, consecutive ones as a range: ``1-3, 5, 7-20``."""
    out: list[str] = []
    numbers = sorted(set(releases))
    start = prev = None
    for r in [*numbers, None]:
        if r is not None and prev is not None and r == prev + 1:
            prev = r
            continue
        if start is not None:
            out.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = r
    return ", ".join(out)
