"""The settings and inputs a release row records (``releases.params``, stored as JSON).

:class:`DraftParams` is what a draft or an import writes when it opens its row
(:meth:`state.store.StateStore.begin_draft`) and what every reader of the row gets back:
the release's privacy settings as its manifest names them (docs/release-contract.md), the
snapshot it was computed from, who prepared it and the decisions its draft was allowed
(a repeated snapshot, skipped periods). Writing is strict: an unknown key or a value of
the wrong type is refused. Reading keeps working for rows an older serialpub wrote: a
setting recorded only since then takes the value those releases were made with.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict

from anonymizer.settings import (
    AfterKPrime,
    Algorithm,
    Dilution,
    Guarantee,
    PartitionModel,
    PartitionTest,
    SplitRule,
    Strategy,
    SuppressionModel,
)

#: the privacy settings, named as the manifest names them; a row records them under the same keys
SETTINGS = (
    "quasi_identifiers",
    "sensitive",
    "l",
    "strategy",
    "k_prime",
    "after_k_prime",
    "alpha",
    "guarantee",
    "dilution",
    "suppression_model",
    "algorithm",
    "partition_model",
    "numeric_quasi_identifiers",
    "suppression_budget",
    "protected_values",
)


class DraftParams(BaseModel):
    """A release row's ``params``.

    Attributes:
        quasi_identifiers ... protected_values: the privacy settings (:data:`SETTINGS`; an
            import records no ``quasi_identifiers``, ``sensitive``, ``after_k_prime``,
            ``algorithm`` or ``partition_model``). ``after_k_prime`` is null for a strategy
            other than the constant one.
        accepted_known_breach: the breachable models the publisher acknowledged (spellings
            of :class:`serialpub.known_breach.KnownBreach`).
        snapshot: where the snapshot was read (a path or ``sql:...``); for an import, the
            snapshot listing the present individuals, if one was given.
        snapshot_rows, snapshot_sha256: its record count and the sha256 of its bytes.
        repeats_snapshot_of: the published releases whose snapshot had the same bytes (the
            draft was allowed it).
        skipped_periods, skip_reason: the periods the draft was allowed to skip, and why.
        prepared_by, four_eyes: who prepared it and whether ``sign_off.four_eyes`` was on then.
        staged_manifest: sha256 of each field of the manifest serialpub last staged for it
            (:mod:`serialpub.workflow.manifest_binding`).
        imported: published with another tool (``serialpub import-release``); ``source``
            and ``source_sha256``: the data file as given and its sha256.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    quasi_identifiers: list[str] | None = None
    sensitive: str | None = None
    l: float  # noqa: E741 (the manifest's name for ℓ)
    strategy: Strategy
    k_prime: int | None = None
    # releases made before renewal existed stopped at k'
    after_k_prime: AfterKPrime | None = AfterKPrime.STOP
    alpha: float | None = None
    guarantee: Guarantee
    dilution: Dilution
    # releases made before each of these settings existed: the paper's suppression model,
    # the bottom-up search and the parts' own counts
    suppression_model: SuppressionModel = SuppressionModel.PAPER
    algorithm: Algorithm = Algorithm.BOTTOMUP
    partition_model: PartitionModel | None = PartitionModel.PARTS
    # recorded only under partition_test: noisy (releases before it existed used the sound test)
    partition_test: PartitionTest = PartitionTest.SOUND
    partition_epsilon: float | None = None
    # recorded only under split_rule: history (releases before it existed split as widest)
    split_rule: SplitRule = SplitRule.WIDEST
    # recorded only above 1 (releases before it existed charged the uniform share)
    propensity_ratio: int | dict[str, int] = 1
    accepted_known_breach: list[str] = []
    numeric_quasi_identifiers: list[str] = []
    suppression_budget: float | None = None
    protected_values: list[str] | None = None
    snapshot: str | None = None
    snapshot_rows: int | None = None
    snapshot_sha256: str | None = None
    repeats_snapshot_of: list[int] = []
    skipped_periods: list[str] = []
    skip_reason: str | None = None
    prepared_by: str | None = None
    four_eyes: bool | None = None
    staged_manifest: dict[str, str] | None = None
    imported: bool = False
    source: str | None = None
    source_sha256: str | None = None

    @classmethod
    def read(cls, data: dict[str, Any] | None) -> Self:
        """The params of a stored row. Keys this version does not know (a row written by a
        newer or an older serialpub) are left out rather than refused: no reader uses them.

        Raises:
            pydantic.ValidationError: a known key holds a value of the wrong type.
        """
        return cls.model_validate({k: v for k, v in (data or {}).items() if k in cls.model_fields})

    def record(self) -> dict[str, Any]:
        """The JSON the row stores: the keys it was made or read with, enumerations as
        their spelling."""
        return self.model_dump(mode="json", exclude_unset=True)

    def recorded_settings(self) -> dict[str, Any]:
        """The privacy settings the row records, as the manifest spells them (:data:`SETTINGS`;
        a setting a draft made by an older serialpub did not record is left out)."""
        return self.model_dump(mode="json", include=set(SETTINGS) & self.model_fields_set)
