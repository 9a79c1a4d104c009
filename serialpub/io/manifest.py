"""The release contract's ``manifest.json`` as one typed model (docs/design.md section 5;
every key: docs/release-contract.md).

Publishing and importing write a :class:`Manifest`; the audit, ``state verify`` and the
reports read one. Parsing is strict: a missing key, a key the contract does not have, a
value of the wrong type (a string where a number belongs, a strategy not spelled as the
contract spells it) or a newer ``format_version`` is refused with one line naming the file
and the key. Keys that later versions of serialpub added (``after_k_prime``, ``algorithm``,
``numeric_quasi_identifiers``, ...) are optional, so releases published before they existed
still parse; a manifest is written back with exactly the keys it was made or read with, in
the contract's order (``exclude_unset``), so reading and writing a published manifest is
byte-for-byte the identity.

The group rows (:class:`GroupRow`) are the state's record of each QI-group of a release,
written by publishing and importing and compared by ``state verify``.
"""

from __future__ import annotations

import json
import math
import unicodedata
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

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
from serialpub.errors import InputError, quoted
from serialpub.io.names import SafeName, Sha256
from serialpub.io.series_records import KEY_PATTERN
from serialpub.known_breach import KnownBreach, recorded

#: the manifest format this version writes and the newest it reads (2: the hash chain and
#: the signing key, docs/release-contract.md "Integrity")
FORMAT_VERSION = 2


class _Contract(BaseModel):
    """Strict: no coercion, no unknown keys; assignments are validated."""

    model_config = ConfigDict(strict=True, extra="forbid", validate_assignment=True, populate_by_name=True)


class Checksums(_Contract):
    """sha256 (hex) of the release's data file (null while it is being written) and of the
    inputs it was made from: the register and each QI's hierarchy file. The register's and
    the hierarchies' name the files of their versions (``registers/<sha256>.parquet``,
    ``hierarchy-versions/<qi>/<sha256>.csv``), so they and the QI names are checked as
    names before any reader joins them into a path (:mod:`serialpub.io.names`)."""

    data_parquet: Sha256 | None = Field(validation_alias="data.parquet", serialization_alias="data.parquet")
    # named so in Python because ``register`` would shadow ABCMeta.register
    register_file: Sha256 = Field(validation_alias="register", serialization_alias="register")
    hierarchies: dict[SafeName, Sha256]


class QueryWorkload(_Contract):
    """The range-count query workload and its average relative error (docs/design.md
    section 8): ``queries`` queries over ``qd`` QIs of ``selectivity`` each, from ``seed``.
    ``average_relative_error`` spreads a generalized value uniformly over its leaves (paper
    001's estimator); ``register_weighted_error`` answers the same queries spreading it by
    the register's count of each leaf (the manifest's ``register_marginals``); absent from
    releases made before it existed and from imported ones. ``register_joint_error``, the
    primary figure, spreads each group's counts over the register individuals of its region
    (:mod:`anonymizer.joint`), and ``histogram_baseline_error`` does the same for a release
    of the sensitive histogram alone (docs/data-users.md)."""

    average_relative_error: float | None
    register_weighted_error: float | None = None
    register_joint_error: float | None = None
    histogram_baseline_error: float | None = None
    queries: int
    qd: int
    selectivity: float
    seed: int


class MeasureRecord(_Contract):
    """One figure of the report computed when the draft was made (docs/reports.md)."""

    name: str
    value: float | Literal["inf", "-inf"] | None  # JSON has no infinity
    unit: str
    source: str
    note: str
    family: str


class SuiteVerdict(_Contract):
    """A validation suite's outcome and, in a draft's manifest, the sha256 of its result
    (left out of a published manifest: a function of the raw snapshot; ``validation.json``
    keeps it)."""

    success: bool
    sha256: str | None = None


class Validation(_Contract):
    """The validation of the release (docs/validation.md): overall outcome, the sha256 of
    ``validation.json``, whether the global-guarantee suite ran (false only for the
    localized baseline), every suite's verdict and the sha256 of ``validation.html``
    (``page_sha256``; absent from releases made before it was bound)."""

    success: bool
    sha256: str | None
    global_guarantee_checked: bool
    suites: dict[str, SuiteVerdict]
    page_sha256: str | None = None


class Approval(_Contract):
    """An earlier approval of a release that needed several (``sign_off.required_approvals``)."""

    approver: str
    comment: str
    decided_at: str
    report_sha256: str | None


class SignOff(_Contract):
    """The sign-off that let the release be published. ``decided_at``: UTC, ISO 8601;
    ``report_sha256``: the ``report.html`` the approver saw; ``automatic``: approved by
    ``sign_off.auto_approve`` (test and demo environments); ``earlier_approvals``: the
    approvals before this one, oldest first, written only when a release needed more than one;
    ``prepared_by``: the account that prepared the release and ``four_eyes``: whether
    ``sign_off.four_eyes`` was on when it was drafted (the rule its approvals were held to;
    both absent from releases made before they were recorded; docs/compliance.md)."""

    decision: str
    approver: str
    comment: str
    decided_at: str
    report_sha256: str | None
    automatic: bool
    earlier_approvals: list[Approval] = Field(default_factory=list)
    prepared_by: str | None = None
    four_eyes: bool | None = None

    def self_approvals(self) -> list[str]:
        """The approvers (this one and the earlier ones) who are the preparer, when the
        four-eyes rule was on at drafting; names compared in NFKC with white space collapsed,
        as sign-offs are recorded (docs/compliance.md, "Who may sign off"). Empty when the
        rule was off or the preparer is not recorded."""
        if not self.four_eyes or self.prepared_by is None:
            return []
        preparer = _name(self.prepared_by)
        approvers = [self.approver, *(a.approver for a in self.earlier_approvals)]
        return [a for a in approvers if _name(a) == preparer]


def _name(name: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", name).split())


#: keys of a draft's manifest that are computed from the raw snapshot and are left out of
#: the published manifest (:meth:`Manifest.published`)
RAW_DERIVED_KEYS = ("utility", "measures", "search_levels")


class Manifest(_Contract):
    """``manifest.json`` of one release, keys in the order they are written.

    Raises (from :meth:`parse`, :meth:`read`): InputError naming the file and the key.
    """

    format_version: int
    dataset: SafeName
    release: int = Field(ge=1)
    period: str
    created: str
    # each names its hierarchy file (hierarchies/<qi>.csv): a name, never a path
    quasi_identifiers: list[SafeName] = Field(min_length=1)
    sensitive: SafeName
    l: float = Field(ge=1)  # noqa: E741 (the contract's name for ℓ)
    strategy: Strategy
    k_prime: int | None
    after_k_prime: AfterKPrime | None = None
    alpha: float | None
    guarantee: Guarantee
    dilution: Dilution
    suppression_model: SuppressionModel | None = None
    algorithm: Algorithm | None = None
    partition_model: PartitionModel | None = None
    # the top-down search's split test and its ε, written only under partition_test: noisy
    # (docs/threat-model.md, "The noisy split test")
    partition_test: PartitionTest | None = None
    partition_epsilon: float | None = Field(default=None, gt=0)
    # the top-down search's split rule, written only under split_rule: history
    # (docs/anonymization.md, "Where the cuts fall")
    split_rule: SplitRule | None = None
    # ρ, written only above 1 (docs/threat-model.md, "The propensity ratio"): every charge
    # of the release is min(n_j, ρ·n_{j,s}) / n_j; a mapping gives ρ per protected value
    # (the values it lists, each above 1; the others are charged with 1)
    propensity_ratio: Annotated[int, Field(ge=2)] | dict[str, Annotated[int, Field(ge=2)]] | None = None
    # the breachable models the publisher acknowledged (serialpub.known_breach); written only
    # when there is one
    accepted_known_breach: list[KnownBreach] = []
    numeric_quasi_identifiers: list[SafeName] = []
    suppression_budget: float | None = None
    protected_values: list[str]
    records: int = Field(ge=0)
    groups: int = Field(ge=0)
    suppressed: int | None = Field(ge=0)  # null: an import without its snapshot cannot tell
    max_breach_probability: float | None = None
    constant_ratio_target: float | None = None
    utility: QueryWorkload | None = None
    # per QI, register individuals per leaf: public (the threat model grants the adversary
    # the whole register), published so that a data user can spread a generalized value by it
    register_marginals: dict[str, dict[str, int]] | None = None
    measures: list[MeasureRecord] = []
    # the top-down search's per level account of what blocked its splits
    # (anonymizer.topdown.level_report, values by name): the report shows it. Draft only: under
    # presence dilution or the parts model it reads counts the release does not publish
    search_levels: list[dict[str, Any]] | None = None
    sha256: Checksums
    previous_release: int | None
    # sha256 of the previous release's manifest.json (null for the first): the hash chain
    previous_manifest_sha256: str | None = None
    # the Ed25519 public key whose signature of this file is manifest.sig (io/signing.py)
    signing_key: str | None = Field(default=None, pattern=KEY_PATTERN)
    validation: Validation | None
    sign_off: SignOff | None
    imported: bool = False
    source_sha256: str | None = None
    # evidence file name -> its sha256; each name is opened in the release folder
    report: dict[SafeName, str] | None = None

    @field_validator("format_version")
    @classmethod
    def _known_version(cls, v: int) -> int:
        if not 1 <= v <= FORMAT_VERSION:
            raise ValueError(f"must be 1..{FORMAT_VERSION}; a newer serialpub wrote it, upgrade to read it")
        return v

    @field_validator("l")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("must be a finite number >= 1 (the bound is 1/ℓ)")
        return v

    @model_validator(mode="after")
    def _numeric_are_qis(self) -> Manifest:
        stray = [q for q in self.numeric_quasi_identifiers if q not in self.quasi_identifiers]
        if stray:
            raise ValueError(f"numeric_quasi_identifiers names {stray}, which are not quasi_identifiers")
        if isinstance(self.propensity_ratio, dict):
            stray = [v for v in self.propensity_ratio if v not in self.protected_values]
            if stray or not self.propensity_ratio:
                raise ValueError(f"propensity_ratio names {stray or 'no value'}; name values of protected_values")
        return self

    # -- reading ---------------------------------------------------------------------------
    @classmethod
    def parse(cls, data: str | bytes | dict[str, Any], where: str) -> Manifest:
        """The manifest in ``data`` (JSON text, or a dict as ``json.loads`` returns it).

        Raises:
            InputError: ``where``: the first key that breaks the contract and why.
        """
        text = data if isinstance(data, str | bytes) else json.dumps(data)
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            raise InputError(f"{where}: {_first_error(exc)}") from None

    @classmethod
    def read(cls, path: Path) -> Manifest:
        """The manifest file at ``path``.

        Raises:
            InputError: the file is missing, unreadable or breaks the contract.
        """
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise InputError(f"{path}: file missing; every release folder holds manifest.json") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{path}: cannot be read ({exc})") from None
        return cls.parse(text, str(path))

    # -- writing ---------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The keys it was made or read with, in the contract's order; enumerations as
        their spelling."""
        data: dict[str, Any] = json.loads(self.to_json())
        return data

    def published(self, where: str) -> Manifest:
        """This manifest without the figures computed from the raw snapshot, as it is
        published (docs/threat-model.md, "Figures computed from the raw snapshot"):
        ``utility``, ``measures``, ``search_levels`` and each suite's result sha256 are functions of the hidden
        world (who is present, who holds which value), so they stay in the publisher's
        evidence (``report.json``, ``validation.json``), which the manifest binds only by
        checksums that a secret nonce makes hiding. Keys and their order are otherwise kept.

        Raises:
            InputError: ``where``: the result breaks the contract (it cannot, for a valid draft).
        """
        data = self.to_dict()
        for key in RAW_DERIVED_KEYS:
            data.pop(key, None)
        for verdict in (data.get("validation") or {}).get("suites", {}).values():
            verdict.pop("sha256", None)
        return Manifest.parse(data, where)

    def evidence_checksums(self) -> dict[str, str]:
        """Every evidence file the manifest binds, by file name, to its sha256 (hex): the
        release report (``report.html``, ``report.json``) and the validation evidence
        (``validation.json``, ``validation.html``). Empty for a release without evidence
        (imported, or made before evidence existed)."""
        listed = dict(self.report or {})
        if self.validation is not None:
            for name, sha in (
                ("validation.json", self.validation.sha256),
                ("validation.html", self.validation.page_sha256),
            ):
                if sha is not None:
                    listed[name] = sha
        return listed

    def known_breach(self) -> list[KnownBreach]:
        """The models with a known breach the release was made under, as its settings show
        them (:func:`serialpub.known_breach.recorded`: a release that records no model was
        made by the bottom-up search under the paper's suppression model); what the audit's
        verdict and the series report name."""
        return recorded(
            None if self.suppression_model is None else str(self.suppression_model),
            None if self.algorithm is None else str(self.algorithm),
            None if self.partition_model is None else str(self.partition_model),
            self.imported,
        )

    def to_json(self) -> str:
        """The file's text: two-space indented JSON and a final newline."""
        data = self.model_dump(mode="python", by_alias=True, exclude_unset=True)
        return json.dumps(data, indent=2) + "\n"


class GroupRow(_Contract):
    """The state's row of one QI-group: its QI labels (in ``quasi_identifiers`` order), its
    candidates (register individuals it covers, or present ones under presence), its
    published records and the records of each protected value it holds."""

    labels: list[str]
    candidates: int = Field(ge=0)
    records: int = Field(ge=0)
    counts: dict[str, int]


def _first_error(exc: ValidationError) -> str:
    """One line for the first error: which key, and what the contract wants."""
    err = exc.errors(include_url=False)[0]
    loc = [str(p) for p in err["loc"]]
    kind = err["type"]
    if loc[-1:] == ["[key]"]:  # a key of a mapping (sha256.hierarchies, report): named by its mapping
        where = ".".join(loc[:-2])
        return f"a key of '{where}' {_lower(err['msg'])}, got {quoted(err.get('input'))}"
    key = ".".join(loc)
    if kind == "json_invalid":
        return f"is not valid JSON ({err['ctx']['error']})"
    if not key:  # a rule across keys (numeric_quasi_identifiers)
        return _lower(err["msg"])
    if kind == "missing":
        return f"key '{key}' is missing; the release contract requires it"
    if kind == "extra_forbidden":
        return f"key '{key}' is not part of the release contract (format_version {FORMAT_VERSION}); remove it"
    return f"'{key}' {_lower(err['msg'])}, got {quoted(err.get('input'))}"


def _lower(msg: str) -> str:
    msg = msg.removeprefix("Value error, ")
    return msg[:1].lower() + msg[1:]
