"""Workspace configuration: ``serialpub.yaml``, validated with pydantic.

Paths in the file are relative to the file's folder. The database URL is taken from
``SERIALPUB_DATABASE_URL`` when that is set, else from the file, else SQLite in the
workspace (``state.sqlite``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from anonymizer.settings import (
    AfterKPrime,
    Algorithm,
    Dilution,
    Guarantee,
    PartitionModel,
    Strategy,
    SuppressionModel,
)
from serialpub.errors import InputError
from serialpub.io.periods import PeriodFormat
from serialpub.io.settings_yaml import read_settings
from serialpub.io.sources import SQL_PREFIX, InputSource, parse_source
from serialpub.known_breach import KnownBreach, acknowledgement_problem

CONFIG_NAME = "serialpub.yaml"
#: every settings model: no unknown setting, no coercion (the string "2" is not a number, nor
#: "yes" a boolean), no infinite or NaN number. Values are validated as JSON (load_config), so
#: paths and enumerations are still given as strings.
STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
DATABASE_ENV = "SERIALPUB_DATABASE_URL"


class ValidationThresholds(BaseModel):
    """Utility expectations of the release suite and the snapshot's row-count bounds; a
    threshold left out or null is not checked."""

    model_config = STRICT

    # a snapshot's rows must lie within these multiples of the previous snapshot's
    min_snapshot_rows_ratio: float | None = Field(default=0.5, ge=0, le=1)
    max_snapshot_rows_ratio: float | None = Field(default=2.0, ge=1)

    max_suppression_rate: float | None = Field(default=None, ge=0, le=1)
    max_query_error: float | None = Field(default=None, gt=0)  # the register-joint estimator's
    min_gain: float | None = None  # over the histogram-only baseline (docs/configuration.md)
    max_avg_group_size: float | None = Field(default=None, gt=0)
    max_group_size: int | None = Field(default=None, gt=0)


class SignOffSettings(BaseModel):
    """The compliance sign-off gate before publication."""

    model_config = STRICT

    # approve every validated release automatically: test and demo environments only; the
    # manifest of each release says when it was used
    auto_approve: bool = False
    # hours an approver has to decide in Airflow before the run fails (and the release
    # with it); the command line waits for 'serialpub approve' or 'serialpub reject'
    timeout_hours: float = Field(default=72.0, gt=0)
    # who may approve or reject: operating-system accounts (the command line) and Airflow
    # user names (the gate is assigned to them); serialpub.workflow.identity
    approvers: list[str] = []
    # the account that prepared a release cannot approve it
    four_eyes: bool = True
    # distinct approvers a release needs before it is published (each other than the
    # preparer under four_eyes); one rejection ends it
    required_approvals: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _enough_approvers(self) -> SignOffSettings:
        if self.required_approvals > 1 and len(set(self.approvers)) < self.required_approvals:
            raise ValueError(
                f"required_approvals is {self.required_approvals} but approvers lists {len(set(self.approvers))}: "
                "list at least as many approvers as the approvals a release needs"
            )
        return self


class ReportConfig(BaseModel):
    """Parameters of the report's measures (the reader's choices, not the guarantee's)."""

    model_config = STRICT

    # a pair counts as near the bound when its breach probability is at least this x 1/l
    near_bound_fraction: float = Field(default=0.9, gt=0, le=1)
    # c of recursive (c, l)-diversity (Machanavajjhala et al.)
    recursive_c: float = Field(default=3.0, gt=0)
    # personalized breach (Xiao & Tao): guarding node = the value's ancestor this many
    # levels up in the sensitive attribute's hierarchy (0: the value itself)
    guarding_levels_up: int = Field(default=0, ge=0)
    # sensitive categories of the thesis's categorical diversity, name -> values (they may
    # overlap); values in no category form the don't-care set Y
    categories: dict[str, list[str]] | None = None


class Config(BaseModel):
    """One dataset's publication settings (see :data:`TEMPLATE` for the documented file)."""

    model_config = ConfigDict(**STRICT, populate_by_name=True)

    dataset: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    # a file (.csv, .parquet) or sql:TABLE / sql:SELECT ... (serialpub.io.sources)
    register_file: str = Field(default="register.csv", alias="register", min_length=1)
    hierarchies: Path = Path("hierarchies")
    release_store: Path = Path("releases")
    landing_zone: Path = Path("landing")
    database_url: str | None = None
    # the database holding a register or snapshots given as sql:... (a SQLAlchemy URL)
    input_database_url: str | None = None
    id_column: str = "id"
    quasi_identifiers: list[str] = Field(min_length=1)
    # QIs whose values are numbers: the top-down search cuts them into [lo, hi] intervals
    numeric: list[str] = Field(default_factory=list)
    sensitive: str
    sensitive_domain_file: Path | None = Field(default=None, alias="sensitive_domain")
    protected_values: Literal["all"] | list[str] = "all"
    ell: float = Field(alias="l", ge=2)
    strategy: Strategy = Strategy.CONSTANT
    k_prime: int | None = Field(default=20, ge=1)
    after_k_prime: AfterKPrime = AfterKPrime.RENEW
    alpha: float | None = Field(default=None, gt=1)
    guarantee: Guarantee = Guarantee.GLOBAL
    dilution: Dilution = Dilution.REGISTER
    suppression_model: SuppressionModel = SuppressionModel.MECHANISM
    algorithm: Algorithm = Algorithm.TOPDOWN
    # what the top-down search's split decisions read; None: the algorithm's own
    # (top-down: published; bottom-up: parts, the only one it has); docs/threat-model.md
    partition_model: PartitionModel | None = None
    # the breachable models chosen above, acknowledged (serialpub.known_breach)
    accept_known_breach: list[KnownBreach] = Field(default_factory=list, validate_default=True)
    suppression_budget: float = Field(default=0.0, ge=0, le=1)
    query_seed: int = 0
    # how period labels are written (serialpub.io.periods): a period that skips one is refused
    period_format: PeriodFormat = PeriodFormat.AUTO
    validation: ValidationThresholds = Field(default_factory=ValidationThresholds)
    sign_off: SignOffSettings = Field(default_factory=SignOffSettings)
    # the publisher's Ed25519 private key (PEM): every published manifest is signed with it
    # (docs/release-contract.md, "Integrity"); null publishes unsigned manifests
    signing_key: Path | None = None
    report: ReportConfig = Field(default_factory=ReportConfig)

    @field_validator("quasi_identifiers")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("quasi_identifiers lists a column twice")
        return v

    @field_validator("accept_known_breach")
    @classmethod
    def _acknowledged(cls, v: list[KnownBreach], info: ValidationInfo) -> list[KnownBreach]:
        d = info.data  # the settings before it, as validated (a refused one is absent)
        problem = acknowledgement_problem(
            v, d.get("suppression_model"), d.get("algorithm"), d.get("partition_model")
        )
        if problem:
            raise PydanticCustomError("known_breach", problem)
        return v

    @model_validator(mode="after")
    def _strategy_parameter(self) -> Config:
        if self.strategy is Strategy.CONSTANT and self.k_prime is None:
            raise ValueError("strategy 'constant' needs k_prime")
        if self.strategy is Strategy.GEOMETRIC and self.alpha is None:
            raise ValueError("strategy 'geometric' needs alpha (> 1)")
        if self.sensitive in self.quasi_identifiers or self.id_column in self.quasi_identifiers:
            raise ValueError("the sensitive and id columns cannot be quasi-identifiers")
        stray = [q for q in self.numeric if q not in self.quasi_identifiers]
        if stray:
            raise ValueError(
                f"numeric lists {', '.join(map(repr, stray))}, which is not a quasi-identifier; "
                "list only columns of quasi_identifiers"
            )
        if len(set(self.numeric)) != len(self.numeric):
            raise ValueError("numeric lists a column twice")
        if self.register_file.startswith(SQL_PREFIX) and not self.input_database_url:
            raise ValueError(
                f"register {self.register_file!r} reads the input database; set input_database_url "
                "(a SQLAlchemy URL, e.g. postgresql+psycopg://host/db)"
            )
        if self.suppression_model is SuppressionModel.MECHANISM and self.suppression_budget > 0:
            # docs/threat-model.md: a suppressed record is still charged, so suppressing it
            # buys no privacy and loses the record
            raise ValueError(
                f"suppression_budget {self.suppression_budget:g} has no effect under suppression_model "
                "'mechanism' (a suppressed record still counts against its region, because an adversary "
                "who knows the algorithm can infer it); set suppression_budget: 0, or suppression_model: "
                "paper to reproduce paper 004's weaker published-count model"
            )
        if self.algorithm is Algorithm.BOTTOMUP and self.partition_model is PartitionModel.PUBLISHED:
            raise ValueError(
                "partition_model 'published' with algorithm 'bottomup', whose cut search reads every cell's counts; "
                "use algorithm: topdown, or leave partition_model out (bottom-up: parts)"
            )
        if self.algorithm is Algorithm.TOPDOWN and self.suppression_budget > 0:
            raise ValueError(
                f"suppression_budget {self.suppression_budget:g} with algorithm 'topdown', which never suppresses; "
                "set suppression_budget: 0, or algorithm: bottomup (with suppression_model: paper) to reproduce "
                "paper 004's suppression"
            )
        return self

    @property
    def effective_partition_model(self) -> PartitionModel:
        """``partition_model``, or the algorithm's own when it is not set."""
        if self.partition_model is not None:
            return self.partition_model
        return PartitionModel.PUBLISHED if self.algorithm is Algorithm.TOPDOWN else PartitionModel.PARTS


class Workspace(BaseModel):
    """A configuration with its folder, resolving the paths in it."""

    root: Path
    config: Config

    def path(self, p: Path) -> Path:
        return p if p.is_absolute() else self.root / p

    @property
    def register_source(self) -> InputSource:
        """Where the population register is read from (:mod:`serialpub.io.sources`).

        Raises:
            InputError: ``register`` names a SQL source but ``input_database_url`` is not
                set, or a file that is neither .csv nor .parquet.
        """
        return parse_source(
            self.config.register_file, self.root, self.config.input_database_url,
            f"{self.root / 'serialpub.yaml'}: setting 'register'",
        )  # fmt: skip

    @property
    def register_path(self) -> Path:
        """The register's file, or for a SQL register the canonical copy's place in the
        workspace (``register.csv``, which only ``public-copy --with-register`` writes)."""
        source = self.register_source
        return source.path if source.path is not None else self.root / "register.csv"

    def snapshot_source(self, spec: str | Path, setting: str = "--snapshot") -> InputSource:
        """A snapshot's source: a file (relative paths from the working directory), or
        ``sql:...`` in the input database (:mod:`serialpub.io.sources`).

        Raises:
            InputError: as :func:`serialpub.io.sources.parse_source`.
        """
        return parse_source(spec, Path.cwd(), self.config.input_database_url, setting)

    @property
    def hierarchy_dir(self) -> Path:
        return self.path(self.config.hierarchies)

    @property
    def landing_dir(self) -> Path:
        """Where snapshots land for the Airflow release DAG (``snapshot-<period>.csv``)."""
        return self.path(self.config.landing_zone)

    @property
    def signing_key_path(self) -> Path | None:
        """The publisher's Ed25519 private key file, or None (unsigned manifests)."""
        return None if self.config.signing_key is None else self.path(self.config.signing_key)

    @property
    def dataset_dir(self) -> Path:
        return self.path(self.config.release_store) / self.config.dataset

    @property
    def database_url(self) -> str:
        url = os.environ.get(DATABASE_ENV) or self.config.database_url
        return url or f"sqlite:///{(self.root / 'state.sqlite').resolve()}"


def load_config(path: Path) -> Workspace:
    """Read and validate a configuration file (read by :func:`serialpub.io.settings_yaml.read_settings`:
    bounded in size, without aliases, booleans only ``true`` and ``false``).

    Raises:
        InputError: the file is missing, too large, not YAML, or a setting is invalid (the
            message names the file and the setting).
    """
    if path.is_dir():
        path = path / CONFIG_NAME
    raw = read_settings(path)
    if not isinstance(raw, dict):
        raise InputError(f"{path}: expected a mapping of settings, e.g. 'dataset: adult'")
    try:
        # as JSON: strict parsing then refuses coercions, while paths and enumerations are strings
        config = Config.model_validate_json(json.dumps(raw, default=str))
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "(file)"
        msg = err["msg"]
        if err["type"] == "bool_type":  # e.g. 'yes', which YAML 1.1 would have read as true
            msg = f"{str(err['input'])[:40]!r} is not a boolean; write true or false"
        raise InputError(f"{path}: setting '{where}': {msg}") from None
    return Workspace(root=path.parent.resolve(), config=config)


TEMPLATE = """\
# serialpub configuration: one dataset published as a series of releases.
# Paths are relative to this file. Every setting is checked when a command starts.

# Name of the dataset; releases go to <release_store>/<dataset>/release-NNNN/.
dataset: {dataset}

# Population register: every individual who could appear in a release, with the id
# column and every quasi-identifier (the adversary is assumed to know it). Replace it with
# each period's register; every version a release used is kept under registers/.
# A .csv or .parquet file, or sql:TABLE (or sql:SELECT ...) in the database named by
# input_database_url (a SQLAlchemy URL); snapshots may be given the same ways.
register: register.csv
# input_database_url: postgresql+psycopg://user@127.0.0.1:5432/statistics
id_column: id

# One ARX-convention hierarchy per quasi-identifier: hierarchies/<column>.csv.
hierarchies: hierarchies
quasi_identifiers: [{qis}]
# Quasi-identifiers whose values are numbers (every leaf of their hierarchy is a number).
# The top-down search cuts them into closed intervals written [lo, hi] (e.g. [30, 39]),
# halving at the register's median, instead of following their hierarchy's levels;
# the hierarchy file still gives the domain. [] publishes hierarchy labels only.
numeric: [{numeric}]

# The sensitive attribute, and which of its values are protected ("all", or a list).
# Its domain (every value it can take, spelled exactly) comes from hierarchies/<sensitive>.csv
# or, without that file, from a text file with one value per line:
# sensitive_domain: domain.txt
# Protecting values needs the domain: a value spelled another way ("HIV " for "hiv") is then
# refused as an input error instead of being published unprotected.
sensitive: {sensitive}
protected_values: {protected}

# The global guarantee: over all releases, P(individual linked to a protected value)
# <= 1/l. l must be at least 2.
l: {ell}

# Strategy for the group-size ratio (candidates / records with the value):
#   constant  - the same target in each of at most k_prime linked releases (min-max optimal)
#   geometric - alpha times the minimum safe ratio, growing with each linked release (alpha > 1)
# Use 'serialpub strategy --l 2 --k-prime 20 --alpha 2' to compare.
strategy: {strategy}
k_prime: {k_prime}
# constant only: a pair (individual, value) linked in k_prime releases is
#   renew - linked again only at the target that spreads what is left of its budget over
#           k_prime more releases (a pair linked at ratios above the target keeps some)
#   stop  - never linked again (paper 004's rule; a release that would is refused)
after_k_prime: {after_k_prime}
alpha: {alpha}

# global: the guarantee over all releases (serialpub's purpose).
# localized: per-release l-diversity only (the baseline that leaks over time; for comparison).
guarantee: {guarantee}

# register: candidates are counted in the register, present or not (virtual dilution).
# presence: presence in the data is public; candidates are the present individuals only.
dilution: {dilution}

# How suppressed records are counted (docs/threat-model.md):
#   mechanism - the default: every snapshot record counts against its region, published
#               or not, because an adversary who knows the algorithm can tell why a record
#               is missing (the minimality attack). Suppression then buys no privacy, so
#               nothing is suppressed and suppression_budget must be 0.
#   paper     - paper 004's published-count model, for reproducing its experiments only:
#               value-selective suppression lowers the counts, and a release's manifest
#               and report say it is weaker against an adversary who knows the algorithm.
suppression_model: {suppression_model}

# The search that forms the groups (docs/anonymization.md):
#   topdown  - the default: splits the QI domain region by region along the hierarchies
#              while every part still meets its requirement; many small groups, never
#              suppresses (suppression_budget must be 0).
#   bottomup - paper 004's global recoding (one cut per QI for the whole release), kept
#              for reproducing the paper; the only one that can suppress (paper model).
algorithm: {algorithm}
# What the top-down search's split decisions read (docs/threat-model.md, "Residual risk"):
#   published - the default: only counts the release publishes; a part must meet its
#               requirement even if it held all of its region's records of a value. The
#               partition then tells an adversary who knows the algorithm nothing more.
#   parts     - each part's own counts: finer groups and lower query error, but a region
#               left unsplit is evidence that one of its parts would have violated, and an
#               exhaustive search of tiny series finds posteriors above 1/l.
# (bottomup always reads its cells' counts: leave this out with it.)
partition_model: {partition_model}
# parts (and bottomup, which reads its cells' counts) and suppression_model paper have a
# known breach (docs/threat-model.md, "Models with a known breach"): choosing one needs
# its acknowledgement here, e.g. [parts] or [parts, paper], and every release's manifest,
# report and sign-off prompt then state the risk. [] with the defaults.
accept_known_breach: [{accept_known_breach}]
# Largest fraction of a snapshot's records that may be suppressed (removed) when
# generalization alone cannot meet the requirement (suppression_model: paper only).
suppression_budget: {budget}

# Where releases are written, and the state database (SERIALPUB_DATABASE_URL overrides;
# default: SQLite file state.sqlite next to this file).
release_store: releases
# Where an upstream extract drops snapshot-<period>.csv for the Airflow release DAG.
landing_zone: landing
# database_url: postgresql+psycopg://user@127.0.0.1:5432/serialpub

# Seed of the 5,000 random range-count queries that measure utility.
query_seed: 0

# How period labels are written: sequence (0001, 0002, ...), year (2025), half-year
# (2025-H1), quarter (2025-Q3), month (2025-07), free (any label that sorts in time;
# gaps cannot be seen), or auto (the format of the first published period). A period is
# given with --period or by the snapshot's name, snapshot-<period>.csv. A period that
# skips one is refused unless 'serialpub release --skip-periods REASON' records why.
period_format: auto

# Utility expectations checked before a release can be published (besides the global
# guarantee, disjoint regions and the release contract, which are always checked).
# A threshold left out or null is not checked.
validation:
  # snapshot rows between these multiples of the previous snapshot's (a sudden halving is
  # more often an extract failure than reality)
  min_snapshot_rows_ratio: 0.5
  max_snapshot_rows_ratio: 2.0
  max_suppression_rate: {budget}
  max_query_error: null
  max_avg_group_size: null
  max_group_size: null

# The compliance sign-off gate: a named approver approves or rejects each validated
# release ('serialpub approve' / 'serialpub reject', or the Airflow approval task).
# auto_approve: true approves automatically: for test and demo environments only; each
# release's manifest records it. timeout_hours: time to decide in Airflow.
sign_off:
  auto_approve: {auto_approve}
  timeout_hours: 72
  # Who may approve or reject: operating-system accounts for 'serialpub approve/reject'
  # (the decision is recorded under the account that runs the command) and Airflow user
  # names for the Airflow gate (assigned to them). Nobody else can sign off.
  approvers: []
  # The account that prepared a release cannot approve it (four-eyes rule).
  four_eyes: true
  # Distinct approvers each release needs before it is published (2: two approvers, both
  # other than the preparer); one rejection ends the release.
  required_approvals: 1

# The publisher's Ed25519 private key ('serialpub keygen --out keys/publisher.key' makes
# one, with keys/publisher.pub to hand to data users). Each published manifest is signed
# with it (manifest.sig) and names the previous release's manifest by its sha256, so
# 'serialpub audit --public-key keys/publisher.pub' detects an edited, forged or deleted
# release. Keep the private key out of the release store; null: unsigned manifests.
signing_key: {signing_key}

# The release report (report.html next to each release; 'serialpub report' for
# the whole series). These only choose how measures are read, never what is published.
report:
  # a pair is near the bound when its breach probability is at least this x 1/l
  near_bound_fraction: 0.9
  # c of recursive (c, l)-diversity
  recursive_c: 3
  # personalized breach probability (Xiao & Tao): each record's guarding node is its
  # value's ancestor this many levels up the sensitive attribute's hierarchy
  guarding_levels_up: 0
  # sensitive categories for the thesis's categorical diversity measures (they may
  # overlap); values in no category form the don't-care set Y. For example:
  # categories: {{cancer: [C34, C50], infectious: [A15, B20]}}
  categories: null
"""


def render_config(
    dataset: str,
    qis: Sequence[str],
    sensitive: str,
    *,
    numeric: Sequence[str] = (),
    ell: float = 2,
    strategy: str = "constant",
    k_prime: int = 20,
    after_k_prime: str = "renew",
    alpha: float = 2.0,
    guarantee: str = "global",
    dilution: str = "register",
    budget: float = 0.0,
    suppression_model: str = "mechanism",
    algorithm: str | None = None,
    partition_model: str | None = None,
    accept_known_breach: Sequence[str] = (),
    protected: Sequence[str] | None = None,
    auto_approve: str | None = None,
    signing_key: str | None = None,
) -> str:
    """The text of a ``serialpub.yaml`` from :data:`TEMPLATE` (every option with its comment).

    Args:
        dataset, qis, sensitive: the dataset name, quasi-identifier columns, sensitive column.
        numeric: the QIs declared numeric (cut into intervals by the top-down search).
        ell, strategy, k_prime, after_k_prime, alpha, guarantee, dilution, budget, suppression_model, algorithm:
            as the template explains; ``algorithm`` None writes ``topdown``, or ``bottomup``
            with a positive budget (the only search that suppresses).
        partition_model: None writes the algorithm's own (top-down: ``published``,
            bottom-up: ``parts``).
        accept_known_breach: the breachable models acknowledged (:mod:`serialpub.known_breach`);
            the file is refused on loading unless they are exactly the ones chosen.
        protected: the protected values; None writes ``all``.
        auto_approve: None writes ``auto_approve: false`` (a person signs off); a text
            writes ``true`` with that text as the comment saying why (a demo, test or
            benchmark environment).
        signing_key: the private key's path, relative to the file; None writes ``null``.
    """
    algorithm = algorithm or ("bottomup" if budget > 0 else "topdown")
    return TEMPLATE.format(
        dataset=dataset,
        qis=", ".join(qis),
        numeric=", ".join(numeric),
        sensitive=sensitive,
        ell=f"{ell:g}",
        strategy=strategy,
        k_prime=k_prime,
        after_k_prime=after_k_prime,
        alpha=f"{alpha:g}",
        guarantee=guarantee,
        dilution=dilution,
        budget=f"{budget:g}",
        suppression_model=suppression_model,
        algorithm=algorithm,
        partition_model=partition_model or ("parts" if algorithm == "bottomup" else "published"),
        accept_known_breach=", ".join(accept_known_breach),
        protected="all" if protected is None else "[" + ", ".join(json.dumps(v) for v in protected) + "]",
        auto_approve="false" if auto_approve is None else f"true  # {auto_approve}",
        signing_key="null" if signing_key is None else signing_key,
    )
