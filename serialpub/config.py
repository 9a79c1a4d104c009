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

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from anonymizer.settings import SEQUENTIAL_ENV, PartitionTest
from serialpub.errors import InputError, quoted
from serialpub.io.periods import PeriodFormat
from serialpub.io.release_settings import STRICT, ReleaseSettings, documented
from serialpub.io.settings_yaml import read_yaml
from serialpub.io.sources import SQL_PREFIX, InputSource, parse_source

CONFIG_NAME = "serialpub.yaml"
#: the largest configuration file read (far above the size of the commented file 'serialpub demo' writes)
MAX_CONFIG_BYTES = 1 << 20
DATABASE_ENV = "SERIALPUB_DATABASE_URL"


class ValidationThresholds(BaseModel):
    """Utility expectations of the release suite `utility` and the row-count bounds of the
    `snapshot` input suite ([validation](validation.md)). The global guarantee, disjoint
    regions and the release contract are always checked; these thresholds come on top.
    **A threshold left out or null is not checked.**"""

    model_config = STRICT

    min_snapshot_rows_ratio: float | None = Field(
        default=0.5,
        ge=0,
        le=1,
        description="a snapshot must have at least this multiple of the previous snapshot's rows (a sudden "
        "halving is more often an extract failure than reality)",
    )
    max_snapshot_rows_ratio: float | None = Field(
        default=2.0, ge=1, description="... and at most this multiple of the previous snapshot's rows"
    )
    max_suppression_rate: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="largest suppressed / snapshot records",
        json_schema_extra=documented(default="null (the demo writes its `suppression_budget`)"),
    )
    max_query_error: float | None = Field(
        default=None,
        gt=0,
        description="largest average relative error of the query workload under the register-joint estimator, "
        "the primary utility figure ([data users](data-users.md); paper 001's uniform estimator for a release "
        "made before it)",
    )
    min_gain: float | None = Field(
        default=None,
        description="smallest gain over the histogram-only baseline (baseline error − release error, "
        "[data users](data-users.md)): refuses a release that tells users little beyond the sensitive histogram",
        json_schema_extra=documented("any number"),
    )
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
        'release\'s manifest records `"automatic": true`. `serialpub demo` sets it to `true`',
    )
    timeout_hours: float = Field(
        default=72.0,
        gt=0,
        description="hours an approver has to decide in Airflow before the run fails (and the release with it); "
        "the command line waits for `serialpub approve` or `serialpub reject` without a limit",
    )
    approvers: list[str] = Field(
        default=[],
        description="who may approve or reject: operating-system accounts (`serialpub approve` / `reject` record "
        "the account running them) and Airflow user names (the gate is assigned to them); nobody else can sign "
        "off. Empty: nobody signs off by hand ([who may sign off](compliance.md#who-may-sign-off))",
        json_schema_extra=documented(
            "names are NFKC-normalized; one holding an invisible or control character is refused when a sign-off "
            "is attempted"
        ),
    )
    four_eyes: bool = Field(
        default=True,
        description="the account that prepared a release (`prepared_by`) cannot approve it (four-eyes rule)",
    )
    required_approvals: int = Field(
        default=1,
        ge=1,
        description="distinct approvers a release needs before it is published (2: two approvers, each other than "
        "the preparer under `four_eyes`); in Airflow, one gate per approval (`sign_off`, `sign_off_2`, ...); one "
        "rejection ends the release ([several approvals](compliance.md#who-may-sign-off))",
        json_schema_extra=documented("at most the number of `approvers`"),
    )

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
        default=0.9,
        gt=0,
        le=1,
        description="a pair counts as near the bound when its breach probability is at least this × 1/ℓ",
    )
    recursive_c: float = Field(
        default=3.0, gt=0, description="c of recursive (c, ℓ)-diversity (Machanavajjhala et al.)"
    )
    guarding_levels_up: int = Field(
        default=0,
        ge=0,
        description="personalized breach probability (Xiao & Tao): each record's guarding node is its value's "
        "ancestor this many levels up the sensitive attribute's hierarchy (0: the value itself)",
    )
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
    )
    learners: list[Literal["nb", "nb-em3", "nb-em10", "logistic-pairs"]] = Field(
        default=["nb"],
        description="the learning adversary's learners whose largest posterior P' each release report shows beside "
        'the uniform charge, fitted on the releases published so far and the draft (docs/threat-model.md, "The '
        'learning adversary"); [] for none. The default is the one-pass naive Bayes learner alone: the others cost '
        "seconds to minutes per release ([benchmarks](benchmarks.md)); e.g. `[nb, logistic-pairs]`",
        json_schema_extra=documented("names from nb, nb-em3, nb-em10, logistic-pairs", type="list of strings"),
    )
    learners_max_work: int = Field(
        default=10_000_000,
        ge=0,
        description="the largest series on which the release report runs the learners, in register cells × sensitive "
        "values × releases (this one included); above it the report says so and leaves the figures to `serialpub "
        "audit --learners nb`. The default keeps the learners on series the size of the demo (16,581 cells × 14 "
        "values × 20 releases: about 1 s of CPU at release 20) and off a 1M/5M series with 2,000 values (16,581 × "
        "2,000 × 2: about 19 s of CPU and 3.4 GiB more at release 2) "
        "([threat model](threat-model.md#in-the-release-report))",
    )


class WorkspaceFiles(BaseModel):
    """Where a dataset's inputs, state and releases are: the settings of ``serialpub.yaml``
    that come before its release settings (field names or the alias ``register``)."""

    model_config = ConfigDict(**STRICT, populate_by_name=True)

    dataset: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
        description="name of the dataset; releases go to `<release_store>/<dataset>/release-NNNN/`; the Airflow "
        "DAG is `serialpub_release_<dataset>`",
    )
    register_file: str = Field(
        default="register.csv",
        alias="register",
        min_length=1,
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
    )
    input_database_url: str | None = Field(
        default=None,
        description="the database a `sql:` register or snapshot is read from (a SQLAlchemy URL); only read, never "
        "written",
        json_schema_extra=documented(
            "required when `register` (or a `--snapshot`) starts with `sql:`",
            example="postgresql+psycopg://user@127.0.0.1:5432/statistics",
            type="SQLAlchemy URL or null",
        ),
    )
    hierarchies: Path = Field(
        default=Path("hierarchies"),
        description="one ARX-convention hierarchy per quasi-identifier, `<folder>/<column>.csv`; optionally "
        "`<folder>/<sensitive>.csv`, whose leaves are the sensitive domain",
        json_schema_extra=documented(
            "each file checked when read (missing, not UTF-8, malformed: exit 2 with file and line)",
            type="path (folder)",
        ),
    )
    release_store: Path = Field(
        default=Path("releases"),
        description="where releases are written: `<release_store>/<dataset>/release-NNNN/`",
        json_schema_extra=documented(type="path (folder)"),
    )
    landing_zone: Path = Field(
        default=Path("landing"),
        description="where an upstream extract drops `snapshot-<period>.csv` for the Airflow release DAG",
        json_schema_extra=documented("used by the DAG only", type="path (folder)"),
    )
    database_url: str | None = Field(
        default=None,
        description=f"the state database (a SQLAlchemy URL); `{DATABASE_ENV}` in the environment overrides it; "
        "when both are unset: SQLite `state.sqlite` in the workspace folder",
        json_schema_extra=documented(
            example="postgresql+psycopg://user@127.0.0.1:5432/serialpub", type="SQLAlchemy URL or null"
        ),
    )
    id_column: str = Field(
        default="id",
        description="the column holding the individual's id, in the register and the snapshots; never published",
        json_schema_extra=documented("must not be a quasi-identifier"),
    )
    sensitive_domain_file: Path | None = Field(
        default=None,
        alias="sensitive_domain",
        description="a text file with every value of the sensitive attribute, one per line, spelled exactly as in "
        "the snapshots; used when `<hierarchies>/<sensitive>.csv` does not exist",
        json_schema_extra=documented(
            "no blank-padded or repeated lines, no two spellings of one value "
            "([spelling](#spelling-of-sensitive-values))",
            example="domain.txt",
        ),
    )


class Config(ReleaseSettings, WorkspaceFiles):
    """One dataset's publication settings, as ``serialpub.yaml`` spells them: where its
    files are (:class:`WorkspaceFiles`), the privacy settings of its releases
    (:class:`serialpub.io.release_settings.ReleaseSettings`) and how the series is run, in
    that order (field names or their aliases ``register`` and ``l``); docs/configuration.md
    and the commented file :func:`serialpub.config_render.render_config` writes are
    generated from the fields' descriptions."""

    model_config = ConfigDict(**STRICT, populate_by_name=True)

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
    )
    sequential: bool = Field(
        default=False,
        description="run every step of a release in turn on one thread instead of overlapping independent steps "
        "(reading the snapshot beside the register, the top-down search's two halves, the measures beside the "
        f"files): the same bytes either way, slower; for debugging and for machines with one core. `{SEQUENTIAL_ENV}` "
        "in the environment overrides it (`1`: in turn; `0`: overlapped) ([scaling](scaling.md#anonymizing-ahead))",
    )
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
    )
    report: ReportConfig = Field(default_factory=ReportConfig)

    @model_validator(mode="after")
    def _columns_and_sources(self) -> Config:
        if self.sensitive in self.quasi_identifiers or self.id_column in self.quasi_identifiers:
            raise ValueError("the sensitive and id columns cannot be quasi-identifiers")
        if self.partition_test is PartitionTest.NOISY and self.signing_key is None:
            raise ValueError("partition_test 'noisy' needs a signing_key: its secret seed is kept beside it")
        if self.register_file.startswith(SQL_PREFIX) and not self.input_database_url:
            raise ValueError(
                f"register {quoted(self.register_file)} reads the input database; set input_database_url "
                "(a SQLAlchemy URL, e.g. postgresql+psycopg://host/db)"
            )
        return self


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
            self.config.register_file,
            self.root,
            self.config.input_database_url,
            f"{self.root / 'serialpub.yaml'}: setting 'register'",
        )

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
        path,
        what="configuration file",
        max_bytes=MAX_CONFIG_BYTES,
        if_missing="create one with 'serialpub demo' as a model",
    )
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
