"""What the operator asked of one run, beside the configuration (docs/design.md section 6)."""

from __future__ import annotations

from dataclasses import dataclass

from state.params import DraftParams


@dataclass(frozen=True)
class ReleaseRequest:
    """What the operator asked of a run, beside the configuration.

    Attributes:
        skip_reason: why the next release may skip periods (``--skip-periods``); None: a
            period that skips one is refused (:func:`serialpub.workflow.input_checks.check_period`).
        allow_repeated_snapshot: the next release may use a snapshot a published release
            already used (``--allow-repeated-snapshot``); else refused
            (:func:`serialpub.workflow.input_checks.check_repeated_snapshot`).
        preparer: who prepares the next release (recorded as ``prepared_by``; four-eyes
            compares it with the approver): the Airflow user who triggered the run; None:
            the OS account.
    """

    skip_reason: str | None = None
    allow_repeated_snapshot: bool = False
    preparer: str | None = None

    @classmethod
    def as_drafted(cls, params: DraftParams) -> ReleaseRequest:
        """The request a draft was made under, as its release row records it: validating the
        draft in another process (a later Airflow task) checks its inputs under the
        decisions taken when it was drafted, not under that process's own request."""
        return cls(
            skip_reason=params.skip_reason,
            allow_repeated_snapshot=bool(params.repeats_snapshot_of),
            preparer=params.prepared_by,
        )
