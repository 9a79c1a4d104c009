"""Workspace configuration: ``serialpub.yaml``, validated with pydantic.

Paths in the file are relative to the file's folder. The database URL is taken from
``SERIALPUB_DATABASE_URL`` when that is set, else from the file, else SQLite in the
workspace (``state.sqlite``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from anonymizer.noisy_split import MAX_EPSILON
from anonymizer.settings import (
    AfterKPrime,
    Algorithm,
    Dilution,
    Guarantee,
    PartitionModel,
    PartitionTest,
    Strategy,
    SuppressionModel,
)
from serialpub.errors import InputError, quoted
from serialpub.io.names import name_problem
from serialpub.io.periods import PeriodFormat
from serialpub.io.settings_yaml import read_yaml
from serialpub.io.sources import SQL_PREFIX, InputSource, parse_source
from serialpub.known_breach import KnownBreach, acknowledgement_problem

CONFIG_NAME = "serialpub.yaml"
#: the largest configuration file read (far above the size of the commented file 'serialpub demo' writes)
MAX_CONFIG_BYTES = 1 << 20
#: every settings model: no unknown setting, no coercion (the string "2" is not a number, nor
#: "yes" a boolean), no infinite or NaN number. Values are validated as JSON (load_config), so
#: paths and enumerations are still given as strings.
STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
DATABASE_ENV = "SERIALPUB_DATABASE_URL"


def documented(
    validation: str | None = None, *, example: str | None = None, type: str | None = None, default: str | None = None
) -> dict[str, JsonValue]:
    """What a setting's row of the tables in docs/configuration.md needs beyond its
    description and its field's bounds, as the field's ``json_schema_extra`` (read by
    :mod:`serialpub.config_render`).

    Args:
        validation: what is checked beyond the field's bounds (Markdown).
        example: a value as written in YAML; a setting that is null is then written
            commented out with it, so that a publisher sees how to spell it.
        type, default: the table's wording where the one derived from the field says less
            (a URL, a folder, a default that depends on another setting).
    """
    extra = {"validation": validation, "example": example, "type": type, "default": default}
    return {k: v for k, v in extra.items() if v is not None}


class ValidationThresholds(BaseModel):
    """Utility expectations of the release suite `utility` and the row-count bounds of the
    `snapshot` input suite ([validation](validation.md)). The global guarantee, disjoint
    regions and the release contract are always checked; these thresholds come on top.
    **A threshold left out or null is not checked.**"""

    model_config = STRICT

    min_snapshot_rows_ratio: float | None = Field(
        default=0.5, ge=0, le=1,
        description="a snapshot must have at least this multiple of the previous snapshot's rows (a sudden "
        "halving is more often an extract failure than reality)",
    )  # fmt: skip
    max_snapshot_rows_ratio: float | None = Field(
        default=2.0, ge=1, description="... and at most this multiple of the previous snapshot's rows"
    )
    max_suppression_rate: float | None = Field(
        default=None, ge=0, le=1, description="largest suppressed / snapshot records",
        json_schema_extra=documented(default="null (the demo writes its `suppression_budget`)"),
    )  # fmt: skip
    max_query_error: float | None = Field(
        default=None, gt=0,
        description="largest average relative error of the query workload under the register-joint estimator, "
        "the primary utility figure ([data users](data-users.md); paper 001's uniform estimator for a release "
        "made before it)",
    )  # fmt: skip
    min_gain: float | None = Field(
        default=None,
        description="smallest gain over the histogram-only baseline (baseline error − release error, "
        "[data users](data-users.md)): refuses a release that tells users little beyond the sensitive histogram",
        json_schema_extra=documented("any number"),
    )  # fmt: skip
    max_avg_group_size: float | None = Field(default=None, gt=0, description="largest average group size in records")
    max_group_size: int | None = Field(default=None, gt=0, description="largest group size in records")


class SignOffSettings(BaseModel):
    """The compliance sign-off gate: a named approver approves or rejects each validated
    release (`serialpub approve` / `serialpub reject`, or the Airflow approval task) before
    it is published ([compliance](compliance.md))."""

    model_config = STRICT

    auto_approve: bool = Field(
        default=False,
        description="approve every validated release automatically: **test and demo environments only**; each "
        "release's manifest records `\"automatic\": true`. `serialpub demo` sets it to `true`",
    )  # fmt: skip
    timeout_hours: float = Field(
        default=72.0, gt=0,
        description="hours an approver has to decide in Airflow before the run fails (and the release with it); "
        "the command line waits for `serialpub approve` or `serialpub reject` without a limit",
    )  # fmt: skip
    approvers: list[str] = Field(
        default=[],
        description="who may approve or reject: operating-system accounts (`serialpub approve` / `reject` record "
        "the account running them) and Airflow user names (the gate is assigned to them); nobody else can sign "
        "off. Empty: nobody signs off by hand ([who may sign off](compliance.md#who-may-sign-off))",
        json_schema_extra=documented(
            "names are NFKC-normalized; one holding an invisible or control character is refused when a sign-off "
            "is attempted"
        ),
    )  # fmt: skip
    four_eyes: bool = Field(
        default=True,
        description="the account that prepared a release (`prepared_by`) cannot approve it (four-eyes rule)",
    )
    required_approvals: int = Field(
        default=1, ge=1,
        description="distinct approvers a release needs before it is published (2: two approvers, each other than "
        "the preparer under `four_eyes`); in Airflow, one gate per approval (`sign_off`, `sign_off_2`, ...); one "
        "rejection ends the release ([several approvals](compliance.md#who-may-sign-off))",
        json_schema_extra=documented("at most the number of `approvers`"),
    )  # fmt: skip

    @model_validator(mode="after")
    def _enough_approvers(self) -> SignOffSettings:
        if self.required_approvals > 1 and len(set(self.approvers)) < self.required_approvals:
            raise ValueError(
                f"required_approvals is {self.required_approvals} but approvers lists {len(set(self.approvers))}: "
                "list at least as many approvers as the approvals a release needs"
            )
        return self


class ReportConfig(BaseModel):
    """Parameters of the measures of the release report (`report.html` beside each release)
    and of the series report (`serialpub report`) ([reports](reports.md)). They only choose
    how measures are read, never what is published."""

    model_config = STRICT

    near_bound_fraction: float = Field(
        default=0.9, gt=0, le=1,
        description="a pair counts as near the bound when its breach probability is at least this × 1/ℓ",
    )  # fmt: skip
    recursive_c: float = Field(
        default=3.0, gt=0, description="c of recursive (c, ℓ)-diversity (Machanavajjhala et al.)"
    )
    guarding_levels_up: int = Field(
        default=0, ge=0,
        description="personalized breach probability (Xiao & Tao): each record's guarding node is its value's "
        "ancestor this many levels up the sensitive attribute's hierarchy (0: the value itself)",
    )  # fmt: skip
    categories: dict[str, list[str]] | None = Field(
        default=None,
        description="sensitive categories for the thesis's categorical diversity measures, name → values (they "
        "may overlap); values in no category form the don't-care set Y",
        json_schema_extra=documented(
            "each value must be a leaf of `<hierarchies>/<sensitive>.csv` when that file exists (checked when a "
            "command starts, exit 2)",
            example="{cancer: [C34, C50], infectious: [A15, B20]}",
            type="mapping of name → list of strings, or null",
        ),
    )  # fmt: skip


class Config(BaseModel):
    """One dataset's publication settings, as ``serialpub.yaml`` spells them (field names
    or their aliases ``register`` and ``l``); docs/configuration.md and the commented file
    :func:`serialpub.config_render.render_config` writes are generated from the fields'
    descriptions."""

    model_config = ConfigDict(**STRICT, populate_by_name=True)

    dataset: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
        description="name of the dataset; releases go to `<release_store>/<dataset>/release-NNNN/`; the Airflow "
        "DAG is `serialpub_release_<dataset>`",
    )  # fmt: skip
    register_file: str = Field(
        default="register.csv", alias="register", min_length=1,
        description="where the population register of the period being released is read from "
        "([inputs](#inputs-files-and-databases)): a `.csv` or `.parquet` file, or `sql:TABLE` / `sql:SELECT ...` "
        "in `input_database_url`; snapshots may be given the same ways. It holds the id column and every "
        "quasi-identifier, one row per individual who could appear in a release; the adversary is assumed to "
        "know it ([concepts](concepts.md)). Replace it with each period's register (births, deaths, moves, ages): "
        "every version a release used is kept under `registers/` and named in its manifest "
        "([design, section 10](design.md#10-a-register-that-changes))",
        json_schema_extra=documented(
            "file checked by the `register` input suite ([validation](validation.md))", type="source"
        ),
    )  # fmt: skip
    input_database_url: str | None = Field(
        default=None,
        description="the database a `sql:` register or snapshot is read from (a SQLAlchemy URL); only read, never "
        "written",
        json_schema_extra=documented(
            "required when `register` (or a `--snapshot`) starts with `sql:`",
            example="postgresql+psycopg://user@127.0.0.1:5432/statistics", type="SQLAlchemy URL or null",
        ),
    )  # fmt: skip
    hierarchies: Path = Field(
        default=Path("hierarchies"),
        description="one ARX-convention hierarchy per quasi-identifier, `<folder>/<column>.csv`; optionally "
        "`<folder>/<sensitive>.csv`, whose leaves are the sensitive domain",
        json_schema_extra=documented(
            "each file checked when read (missing, not UTF-8, malformed: exit 2 with file and line)",
            type="path (folder)",
        ),
    )  # fmt: skip
    release_store: Path = Field(
        default=Path("releases"),
        description="where releases are written: `<release_store>/<dataset>/release-NNNN/`",
        json_schema_extra=documented(type="path (folder)"),
    )  # fmt: skip
    landing_zone: Path = Field(
        default=Path("landing"),
        description="where an upstream extract drops `snapshot-<period>.csv` for the Airflow release DAG",
        json_schema_extra=documented("used by the DAG only", type="path (folder)"),
    )  # fmt: skip
    database_url: str | None = Field(
        default=None,
        description=f"the state database (a SQLAlchemy URL); `{DATABASE_ENV}` in the environment overrides it; "
        "when both are unset: SQLite `state.sqlite` in the workspace folder",
        json_schema_extra=documented(
            example="postgresql+psycopg://user@127.0.0.1:5432/serialpub", type="SQLAlchemy URL or null"
        ),
    )  # fmt: skip
    id_column: str = Field(
        default="id",
        description="the column holding the individual's id, in the register and the snapshots; never published",
        json_schema_extra=documented("must not be a quasi-identifier"),
    )  # fmt: skip
    quasi_identifiers: list[str] = Field(
        min_length=1, description="the QI columns, generalized in releases",
        json_schema_extra=documented(
            "no column twice; must not contain `sensitive` or `id_column`; each a plain file name (not `.` or `..`; "
            "no `/`, `\\` or control character)"
        ),
    )  # fmt: skip
    numeric: list[str] = Field(
        default_factory=list,
        description="the quasi-identifiers whose values are numbers. Under `algorithm: topdown` each is split not "
        "along its hierarchy's levels but along a binary tree of intervals built from the register (halved at the "
        "register's weighted median, down to single values), and published as `[lo, hi]` (e.g. `[30, 39]`), a "
        "single value or `*` ([how groups are formed](anonymization.md), [release contract](release-contract.md)); "
        "the hierarchy file still gives the domain. Under `bottomup` the declared hierarchy is used; `[]` publishes "
        "hierarchy labels only. Recorded in manifests as `numeric_quasi_identifiers`",
        json_schema_extra=documented(
            "each must be in `quasi_identifiers`; no column twice; every leaf of `<hierarchies>/<column>.csv` must "
            "be a number (checked when a command starts: exit 2, naming `serialpub.yaml` and the hierarchy file)"
        ),
    )  # fmt: skip
    sensitive: str = Field(
        description="the sensitive column, published as recorded. Its domain (every value it can take, spelled "
        "exactly) is the leaves of `<hierarchies>/<sensitive>.csv` or, without that file, the `sensitive_domain` "
        "file",
        json_schema_extra=documented(
            "must not be a quasi-identifier; a plain file name (not `.` or `..`; no `/`, `\\` or control character)"
        ),
    )  # fmt: skip
    sensitive_domain_file: Path | None = Field(
        default=None, alias="sensitive_domain",
        description="a text file with every value of the sensitive attribute, one per line, spelled exactly as in "
        "the snapshots; used when `<hierarchies>/<sensitive>.csv` does not exist",
        json_schema_extra=documented(
            "no blank-padded or repeated lines, no two spellings of one value "
            "([spelling](#spelling-of-sensitive-values))",
            example="domain.txt",
        ),
    )  # fmt: skip
    protected_values: Literal["all"] | list[str] = Field(
        default="all",
        description="the sensitive values under protection: `all`, or a list. Protecting values needs the "
        'sensitive domain: a value spelled another way ("HIV " for "hiv") is then refused as an input error '

        "instead of being published unprotected",
        json_schema_extra=documented(
            "needs the sensitive domain: `<hierarchies>/<sensitive>.csv` or `sensitive_domain`; every listed value "
            "must be in it, and a value outside it is refused with the nearest spelling (checked when a command "
            "starts, exit 2). Snapshot values outside the domain are input errors naming the line "
            "([threat model](threat-model.md#no-spelling-bypass))"
        ),
    )  # fmt: skip
    ell: float = Field(
        alias="l", ge=2,
        description="ℓ of the global guarantee: over all releases, every probability of linking an individual to "
        "a protected value (breach probability) stays at most 1/ℓ",
    )  # fmt: skip
    strategy: Strategy = Field(
        default=Strategy.CONSTANT,
        description="how the group-size ratios (candidates / records with the value) are chosen: `constant`, the "
        "same target ñ_c in each of at most `k_prime` linked releases (min-max optimal); `geometric`, `alpha` "
        "times the minimum safe ratio, growing with each linked release. `serialpub strategy --l 2 --k-prime 20 "
        "--alpha 2` compares them ([choosing](choosing.md))",
    )  # fmt: skip
    k_prime: int | None = Field(
        default=20, ge=1,
        description="k' of the constant-ratio strategy: the first k' releases that link one individual to one "
        "protected value each use the target ñ_c; what may follow is `after_k_prime`",
        json_schema_extra=documented("must not be null when `strategy: constant`; ignored under `geometric`"),
    )  # fmt: skip
    after_k_prime: AfterKPrime = Field(
        default=AfterKPrime.RENEW,
        description="constant strategy: what a pair (individual, protected value) linked in k' releases may still "
        "get. `renew`: further links at the target `1 / (1 - ((1 - 1/ℓ)/P)^(1/k'))`, which spreads what is left "
        "of its budget (its survival product P above 1 − 1/ℓ) over k' more linked releases; a pair linked every "
        "time at exactly ñ_c has nothing left and is never linked again. `stop`: never linked again (paper 004's "
        "rule; a release that would link it is refused). The first k' targets are the same under both, and "
        "Theorem 1's floor applies to both ([choosing](choosing.md)). Recorded in manifests (null under "
        "`geometric`)",
        json_schema_extra=documented("ignored under `geometric`"),
    )  # fmt: skip
    alpha: float | None = Field(
        default=None, gt=1,
        description="α of the geometric strategy: the target is α · ñ(k), the minimum safe ratio after k linked "
        "releases times α",
        json_schema_extra=documented("required when `strategy: geometric`; ignored under `constant`"),
    )  # fmt: skip
    guarantee: Guarantee = Field(
        default=Guarantee.GLOBAL,
        description="`global`: the guarantee over all releases (serialpub's purpose); `localized`: per-release "
        "ℓ-diversity only, the baseline that leaks over time, for comparison",
    )  # fmt: skip
    dilution: Dilution = Field(
        default=Dilution.REGISTER,
        description="`register`: candidates are counted in the register, present or not (virtual dilution); "
        "`presence`: presence in the data is public, candidates are the present individuals only. Read [when "
        "dilution is safe to claim]"
        "(concepts.md#when-dilution-is-safe-to-claim-and-when-presence-must-be-assumed-known)",
    )  # fmt: skip
    suppression_model: SuppressionModel = Field(
        default=SuppressionModel.MECHANISM,
        description="which counts are charged ([threat model](threat-model.md)): `mechanism`, every snapshot "
        "record of a region, published or not, because an adversary who knows the algorithm can tell why a record "
        "is missing (the minimality attack); suppression then buys no privacy, so nothing is suppressed. `paper`, "
        "paper 004's published counts with value-selective suppression, for reproducing the paper only (weaker "
        "against an adversary who knows the algorithm; manifests and reports say so)",
    )  # fmt: skip
    algorithm: Algorithm = Field(
        default=Algorithm.TOPDOWN,
        description="the search that forms the groups ([how groups are formed](anonymization.md)): `topdown` "
        "splits the QI domain region by region along the hierarchies while every part meets its requirement "
        "(many small groups; never suppresses); `bottomup` is paper 004's global recoding (one cut per QI for the "
        "whole release), kept for reproducing the paper, and the only one that can suppress",
        json_schema_extra=documented("`suppression_budget` must be 0 under `topdown`"),
    )  # fmt: skip
    partition_model: PartitionModel | None = Field(
        default=None,
        description="what the top-down search's split decisions read ([the partition as "
        "evidence](threat-model.md#the-partition-as-evidence-closed-by-default-partition_model-published)): "
        "`published`, the region's own counts only (a part must meet its requirement even if it held all of the "
        "region's records of a value), so the partition tells an adversary who knows the algorithm nothing more; "
        "`parts`, each part's own counts: finer groups and lower query error (demo 1.13 instead of 9.16), with a "
        "known breach: a partition that is evidence, which a learning adversary uses on the demo ([models with a "
        "known breach](threat-model.md#models-with-a-known-breach)). Null: the algorithm's own (`bottomup` always "
        "reads its cells' counts: leave this out with it)",
        json_schema_extra=documented(
            "`published` is refused with `bottomup`", default="null: `published` (`parts` under `bottomup`)"
        ),
    )  # fmt: skip
    partition_test: PartitionTest = Field(
        default=PartitionTest.SOUND,
        description="how the top-down search admits a split ([how groups are formed](anonymization.md)): `sound`, "
        "only when every part would meet its requirement even holding all of its region's records of a value, "
        "so the partition is no evidence; `noisy`, for large registers: where the sound test admits nothing, one "
        "split chosen from public data is taken when a randomized test on its parts' own counts says so, which "
        "may raise an adversary's posterior to e^ε × its charge ([the noisy split "
        "test](threat-model.md#the-noisy-split-test-partition_test-noisy)); its noise comes from a secret seed "
        "kept beside `signing_key` (`partition-noise.seed`), never published",
        json_schema_extra=documented(
            "`noisy` needs `partition_epsilon`, `algorithm: topdown`, `partition_model: published`, "
            "`dilution: register` and a `signing_key`"
        ),
    )  # fmt: skip
    partition_epsilon: float | None = Field(
        default=None,
        description="ε of `partition_test: noisy`: a refused noisy split moves no posterior above e^ε × its charge "
        "(ln 2 = 0.693 doubles it at most); recorded in every manifest made with it",
        json_schema_extra=documented("in (0, 0.6931] (ln 2), and only with `partition_test: noisy`"),
    )  # fmt: skip
    accept_known_breach: list[KnownBreach] = Field(
        default_factory=list, validate_default=True,
        description="the acknowledgement of the models with a known breach this file chooses ([threat "
        "model](threat-model.md#models-with-a-known-breach)): `parts` for `partition_model: parts` or "
        "`algorithm: bottomup`, `paper` for `suppression_model: paper`, e.g. `[parts]` or `[parts, paper]`; `[]` "
        "with the defaults. Each release's manifest then records it (`accepted_known_breach`), and its report, "
        "the sign-off prompt and `serialpub audit` state the risk. The demo's `--partition-model`, `--algorithm` "
        "and `--suppression-model` write it",
        json_schema_extra=documented(
            "exactly the breachable models chosen: a missing one is refused with one line naming this setting "
            "(exit 2), and so is an acknowledgement of a model not in use or one listed twice"
        ),
    )  # fmt: skip
    suppression_budget: float = Field(
        default=0.0, ge=0, le=1,
        description="`paper` model only: largest fraction of a snapshot's records that may be suppressed "
        "(removed) when generalization alone cannot meet the requirement; a release that needs more is refused "
        "(exit 2)",
        json_schema_extra=documented("must be 0 under `mechanism` or `topdown`"),
    )  # fmt: skip
    query_seed: int = Field(default=0, description="seed of the 5,000 random range-count queries that measure utility")
    period_format: PeriodFormat = Field(
        default=PeriodFormat.AUTO,
        description="how period labels are written: `sequence` (`0001`, `0002`, ...), `year` (`2025`), "
        "`half-year` (`2025-H1`), `quarter` (`2025-Q3`), `month` (`2025-07`), or `free` (any label that sorts in "
        "time, with no successor: gaps cannot be detected); `auto` takes the format of the first published period "
        "(none published: any label). A period is given with `--period` or by the snapshot's name, "
        "`snapshot-<period>.csv`. Every format but `free` knows the next period, so a release that skips one is "
        "refused unless `serialpub release --skip-periods REASON` records why",
        json_schema_extra=documented("a period in another format is refused (exit 2), naming the format"),
    )  # fmt: skip
    validation: ValidationThresholds = Field(default_factory=ValidationThresholds)
    sign_off: SignOffSettings = Field(default_factory=SignOffSettings)
    signing_key: Path | None = Field(
        default=None,
        description="the publisher's Ed25519 private key (PEM; `serialpub keygen --out keys/publisher.key` makes "
        "one, with `keys/publisher.pub` to hand to data users): every published `manifest.json` is signed with it "
        "(`manifest.sig`) and names the previous release's manifest by its sha256, so `serialpub audit "
        "--public-key keys/publisher.pub` detects an edited, forged or deleted release ([release "
        "contract](release-contract.md#integrity-the-hash-chain-and-the-signature)). Keep it out of the release "
        "store; null publishes unsigned manifests",
        json_schema_extra=documented(
            "read when `serialpub release` starts: a missing file or a key that is not an unencrypted Ed25519 PEM "
            "key stops it (exit 2) before anything is drafted",
            default="null (the demo writes `keys/publisher.key`)",
        ),
    )  # fmt: skip
    report: ReportConfig = Field(default_factory=ReportConfig)

    @field_validator("quasi_identifiers")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("quasi_identifiers lists a column twice")
        return v

    @field_validator("quasi_identifiers", "sensitive")
    @classmethod
    def _file_names(cls, v: list[str] | str) -> list[str] | str:
        # each names its hierarchy file and is written to every manifest, whose readers
        # refuse a name that is not a plain file name (serialpub.io.names)
        for name in [v] if isinstance(v, str) else v:
            if (problem := name_problem(name)) is not None:
                raise ValueError(f"{quoted(name)} {problem}; a column here names its hierarchy file <column>.csv")
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
                f"numeric lists {quoted(stray[0])}, which is not a quasi-identifier; "
                "list only columns of quasi_identifiers"
            )
        if len(set(self.numeric)) != len(self.numeric):
            raise ValueError("numeric lists a column twice")
        if self.register_file.startswith(SQL_PREFIX) and not self.input_database_url:
            raise ValueError(
                f"register {quoted(self.register_file)} reads the input database; set input_database_url "
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
        if self.partition_test is PartitionTest.NOISY:
            eps = self.partition_epsilon
            if eps is None or not 0 < eps <= MAX_EPSILON:
                raise ValueError(f"partition_test 'noisy' needs partition_epsilon in (0, {MAX_EPSILON:.4f}] "
                                 f"(ln 2), got {eps!r}")  # fmt: skip
            published = self.effective_partition_model is PartitionModel.PUBLISHED
            if self.algorithm is not Algorithm.TOPDOWN or not published:
                raise ValueError("partition_test 'noisy' needs algorithm: topdown and partition_model: published")
            if self.dilution is not Dilution.REGISTER:
                raise ValueError("partition_test 'noisy' needs dilution: register (its candidate split would read "
                                 "who is present)")  # fmt: skip
            if self.signing_key is None:
                raise ValueError("partition_test 'noisy' needs a signing_key: its secret seed is kept beside it")
        elif self.partition_epsilon is not None:
            raise ValueError("partition_epsilon is set but partition_test is 'sound'; set partition_test: noisy "
                             "or leave partition_epsilon out")  # fmt: skip
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
    """Read and validate a configuration file (read by :func:`serialpub.io.settings_yaml.read_yaml`:
    at most :data:`MAX_CONFIG_BYTES`, without aliases or tags, booleans only ``true`` and ``false``).

    Raises:
        InputError: the file is missing, too large, not YAML, or a setting is invalid (the
            message names the file and the setting).
    """
    if path.is_dir():
        path = path / CONFIG_NAME
    raw = read_yaml(
        path, what="configuration file", max_bytes=MAX_CONFIG_BYTES,
        if_missing="create one with 'serialpub demo' as a model",
    )  # fmt: skip
    if not isinstance(raw, dict):
        raise InputError(f"{path}: expected a mapping of settings, e.g. 'dataset: adult'")
    return Workspace(root=path.parent.resolve(), config=config_of(raw, str(path)))


def config_of(settings: Mapping[str, object], where: str) -> Config:
    """The configuration of ``settings`` as a YAML file spells them (keys as in
    ``serialpub.yaml``, paths and choices as strings), validated as :func:`load_config` does.

    Raises:
        InputError: a setting is invalid; one line naming ``where`` (the file, or the
            command that chose the settings) and the setting.
    """
    try:
        # as JSON: strict parsing then refuses coercions, while paths and enumerations are strings
        return Config.model_validate_json(json.dumps(settings, default=str))
    except ValidationError as exc:
        err = exc.errors()[0]
        at = ".".join(str(x) for x in err["loc"]) or "(file)"
        msg = err["msg"]
        if err["type"] == "bool_type":  # e.g. 'yes', which YAML 1.1 would have read as true
            msg = f"{quoted(err['input'])} is not a boolean; write true or false"
        # a key may be the file's own text (an unknown setting): quoted, as every value is
        raise InputError(f"{where}: setting {quoted(at)}: {msg}") from None
