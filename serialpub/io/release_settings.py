"""One release's privacy settings, declared once (:class:`ReleaseSettings`).

Each setting is one field here: its name, type, default, bounds and description, and in its
``json_schema_extra`` (:func:`documented`) the key a release's row and manifest record it
under, the option of ``serialpub demo`` and of ``serialpub plan`` that choose it, and what
the plan's grid takes. Everything else reads these fields: the configuration
(:class:`serialpub.config.Config` is a ``ReleaseSettings`` plus the workspace's own
settings), docs/configuration.md and the commented ``serialpub.yaml``
(:mod:`serialpub.config_docs`, :mod:`serialpub.config_render`), the draft's record of its
settings (:meth:`ReleaseSettings.recorded`, into :class:`state.params.DraftParams` and the
manifest), the demo's and the plan's options (:data:`DEMO_OPTIONS`, :data:`PLAN_OPTIONS`).
The manifest (:class:`serialpub.io.manifest.Manifest`) and the row keep their own,
backward-compatible declaration of the recorded keys (a release made before a setting
existed records none), and ``tests/test_release_settings.py`` fails when a setting is
declared here and missing there, or the other way round.

It lives in :mod:`serialpub.io` so that the audit, which reads published files only, may
import it as the writer side does.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationInfo, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from anonymizer.settings import (
    MAX_EPSILON,
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
from serialpub.errors import quoted
from serialpub.io.names import name_problem
from serialpub.known_breach import KnownBreach, acknowledgement_problem

#: every settings model: no unknown setting, no coercion (the string "2" is not a number, nor
#: "yes" a boolean), no infinite or NaN number. Values are validated as JSON
#: (:func:`serialpub.config.load_config`), so paths and enumerations are still given as strings.
STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
#: one ρ of the propensity ratio (docs/threat-model.md, "The propensity ratio")
Ratio = Annotated[int, Field(ge=1, le=1000)]


def documented(
    validation: str | None = None,
    *,
    example: str | None = None,
    type: str | None = None,
    default: str | None = None,
    record: str | None = None,
    demo: str | None = None,
    plan: str | None = None,
    takes: str | None = None,
) -> dict[str, JsonValue]:
    """What a setting needs beyond its description and its field's bounds, as the field's
    ``json_schema_extra``: the row of the tables in docs/configuration.md (read by
    :mod:`serialpub.config_render`) and, for a :class:`ReleaseSettings` field, where else the
    setting is spelled.

    Args:
        validation: what is checked beyond the field's bounds (Markdown).
        example: a value as written in YAML; a setting that is null is then written
            commented out with it, so that a publisher sees how to spell it.
        type, default: the table's wording where the one derived from the field says less
            (a URL, a folder, a default that depends on another setting).
        record: the key a release's row and manifest record the setting under, when it is
            not the setting's own key.
        demo, plan: the option of ``serialpub demo`` / ``serialpub plan`` that chooses it
            (none: the command does not).
        takes: what the plan's grid accepts, for the message refusing a value.
    """
    extra = {
        "validation": validation, "example": example, "type": type, "default": default, "record": record,
        "demo": demo, "plan": plan, "takes": takes,
    }  # fmt: skip
    return {k: v for k, v in extra.items() if v is not None}


def _extra(field: FieldInfo) -> dict[str, Any]:
    found = field.json_schema_extra
    return found if isinstance(found, dict) else {}


class ReleaseSettings(BaseModel):
    """The privacy settings of one release, as ``serialpub.yaml`` spells them (field names
    or the alias ``l``)."""

    model_config = ConfigDict(**STRICT, populate_by_name=True)

    quasi_identifiers: list[str] = Field(
        min_length=1,
        description="the QI columns, generalized in releases",
        json_schema_extra=documented(
            "no column twice; must not contain `sensitive` or `id_column`; each a plain file name (not `.` or `..`; "
            "no `/`, `\\` or control character)"
        ),
    )
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
            "be a number (checked when a command starts: exit 2, naming `serialpub.yaml` and the hierarchy file)",
            record="numeric_quasi_identifiers",
        ),
    )
    sensitive: str = Field(
        description="the sensitive column, published as recorded. Its domain (every value it can take, spelled "
        "exactly) is the leaves of `<hierarchies>/<sensitive>.csv` or, without that file, the `sensitive_domain` "
        "file",
        json_schema_extra=documented(
            "must not be a quasi-identifier; a plain file name (not `.` or `..`; no `/`, `\\` or control character)"
        ),
    )
    protected_values: Literal["all"] | list[str] = Field(
        default="all",
        description="the sensitive values under protection: `all`, or a list. Protecting values needs the "
        'sensitive domain: a value spelled another way ("HIV " for "hiv") is then refused as an input error '
        "instead of being published unprotected",
        json_schema_extra=documented(
            "needs the sensitive domain: `<hierarchies>/<sensitive>.csv` or `sensitive_domain`; every listed value "
            "must be in it, and a value outside it is refused with the nearest spelling (checked when a command "
            "starts, exit 2). Snapshot values outside the domain are input errors naming the line "
            "([threat model](threat-model.md#no-spelling-bypass))",
            demo="--protected",
            plan="--protected",
            takes="all, rarest:m, or values of the domain",
        ),
    )
    ell: float = Field(
        alias="l",
        ge=2,
        description="ℓ of the global guarantee: over all releases, every probability of linking an individual to "
        "a protected value (breach probability) stays at most 1/ℓ",
        json_schema_extra=documented(record="l", demo="--l", plan="--l", takes="a number >= 2"),
    )
    strategy: Strategy = Field(
        default=Strategy.CONSTANT,
        description="how the group-size ratios (candidates / records with the value) are chosen: `constant`, the "
        "same target ñ_c in each of at most `k_prime` linked releases (min-max optimal); `geometric`, `alpha` "
        "times the minimum safe ratio, growing with each linked release. `serialpub strategy --l 2 --k-prime 20 "
        "--alpha 2` compares them ([choosing](choosing.md))",
        json_schema_extra=documented(demo="--strategy", plan="--strategy", takes="constant or geometric"),
    )
    k_prime: int | None = Field(
        default=20,
        ge=1,
        description="k' of the constant-ratio strategy: the first k' releases that link one individual to one "
        "protected value each use the target ñ_c; what may follow is `after_k_prime`",
        json_schema_extra=documented(
            "must not be null when `strategy: constant`; ignored under `geometric`",
            demo="--k-prime",
            plan="--k",
            takes="a whole number >= 1",
        ),
    )
    after_k_prime: AfterKPrime = Field(
        default=AfterKPrime.RENEW,
        description="constant strategy: what a pair (individual, protected value) linked in k' releases may still "
        "get. `renew`: further links at the target `1 / (1 - ((1 - 1/ℓ)/P)^(1/k'))`, which spreads what is left "
        "of its budget (its survival product P above 1 − 1/ℓ) over k' more linked releases; a pair linked every "
        "time at exactly ñ_c has nothing left and is never linked again. `stop`: never linked again (paper 004's "
        "rule; a release that would link it is refused). The first k' targets are the same under both, and "
        "Theorem 1's floor applies to both ([choosing](choosing.md)). Recorded in manifests (null under "
        "`geometric`)",
        json_schema_extra=documented(
            "ignored under `geometric`",
            demo="--after-k-prime",
            plan="--after-k",
            takes="renew or stop",
        ),
    )
    alpha: float | None = Field(
        default=None,
        gt=1,
        description="α of the geometric strategy: the target is α · ñ(k), the minimum safe ratio after k linked "
        "releases times α",
        json_schema_extra=documented(
            "required when `strategy: geometric`; ignored under `constant`",
            demo="--alpha",
            plan="--alpha",
            takes="a number > 1",
        ),
    )
    guarantee: Guarantee = Field(
        default=Guarantee.GLOBAL,
        description="`global`: the guarantee over all releases (serialpub's purpose); `localized`: per-release "
        "ℓ-diversity only, the baseline that leaks over time, for comparison",
        json_schema_extra=documented(demo="--guarantee"),
    )
    dilution: Dilution = Field(
        default=Dilution.REGISTER,
        description="`register`: candidates are counted in the register, present or not (virtual dilution); "
        "`presence`: presence in the data is public, candidates are the present individuals only. Read [when "
        "dilution is safe to claim]"
        "(concepts.md#when-dilution-is-safe-to-claim-and-when-presence-must-be-assumed-known)",
        json_schema_extra=documented(demo="--dilution"),
    )
    suppression_model: SuppressionModel = Field(
        default=SuppressionModel.MECHANISM,
        description="which counts are charged ([threat model](threat-model.md)): `mechanism`, every snapshot "
        "record of a region, published or not, because an adversary who knows the algorithm can tell why a record "
        "is missing (the minimality attack); suppression then buys no privacy, so nothing is suppressed. `paper`, "
        "paper 004's published counts with value-selective suppression, for reproducing the paper only (weaker "
        "against an adversary who knows the algorithm; manifests and reports say so)",
        json_schema_extra=documented(demo="--suppression-model"),
    )
    algorithm: Algorithm = Field(
        default=Algorithm.TOPDOWN,
        description="the search that forms the groups ([how groups are formed](anonymization.md)): `topdown` "
        "splits the QI domain region by region along the hierarchies while every part meets its requirement "
        "(many small groups; never suppresses); `bottomup` is paper 004's global recoding (one cut per QI for the "
        "whole release), kept for reproducing the paper, and the only one that can suppress",
        json_schema_extra=documented("`suppression_budget` must be 0 under `topdown`", demo="--algorithm"),
    )
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
            "`published` is refused with `bottomup`",
            default="null: `published` (`parts` under `bottomup`)",
            demo="--partition-model",
            plan="--partition-model",
            takes="published or parts",
        ),
    )
    partition_test: PartitionTest = Field(
        default=PartitionTest.SOUND,
        description="how the top-down search admits a split ([how groups are formed](anonymization.md)): `sound`, "
        "only when every part would meet its requirement even holding all of its region's records of a value, "
        "so the partition is no evidence; `noisy`, for large registers: where the sound test admits nothing, one "
        "split chosen from public data is taken when a randomized test on its parts' own counts says so, which "
        "may raise an adversary's posterior to e^ε × its charge ([the noisy split "
        "test](threat-model.md#the-noisy-split-test-partition_test-noisy)); its noise comes from a secret seed "
        "kept beside `signing_key` (`partition-noise.seed`), never published. Recorded in manifests only under "
        "`noisy`",
        json_schema_extra=documented(
            "`noisy` needs `partition_epsilon`, `algorithm: topdown`, `partition_model: published`, "
            "`dilution: register` and a `signing_key`"
        ),
    )
    partition_epsilon: float | None = Field(
        default=None,
        description="ε of `partition_test: noisy`: a refused noisy split moves no posterior above e^ε × its charge "
        "(ln 2 = 0.693 doubles it at most); recorded in every manifest made with it",
        json_schema_extra=documented(
            "in (0, 0.6931] (ln 2), and only with `partition_test: noisy`",
            plan="--partition-epsilon",
            takes="sound, or ε of partition_test noisy in (0, 0.6931]",
        ),
    )
    split_rule: SplitRule = Field(
        default=SplitRule.WIDEST,
        description="which admissible split the top-down search takes ([where the cuts "
        "fall](anonymization.md#where-the-cuts-fall-split_rule)); the admission test is the same: `widest`, the QI "
        "whose node is widest, blind to the protected values; `history`, the split whose parts' rates of the "
        "protected values, estimated from the earlier releases' published counts spread over the register, differ "
        "most, so the partition stays a function of published data (the first release has no history and splits "
        "as `widest`). Recorded in manifests only under `history`",
        json_schema_extra=documented(
            "`history` needs `algorithm: topdown` and `dilution: register`",
            demo="--split-rule",
            plan="--split-rule",
            takes="widest or history",
        ),
    )
    propensity_ratio: Ratio | dict[str, Ratio] = Field(
        default=1,
        description="ρ: each group is charged ρ times its records of a protected value (at most all of its "
        "candidates), which covers every adversary whose propensity for the value (learned from the releases or "
        "known from outside) is at most ρ times its mean over the group's candidates ([the propensity "
        "ratio](threat-model.md#the-propensity-ratio-propensity_ratio)); 1, paper 004's uniform charge, covers the "
        "adversary whose prior is uniform inside a group. A mapping gives each protected value its own ρ "
        "(`{Tech-support: 3}`; a value it does not list keeps 1), so that only the values a learner reads "
        "sharply pay for it. A larger ρ asks for ρ times the candidates per record "
        "and so coarser groups; `serialpub plan --propensity-ratio 1,2,3` shows what each costs and what the "
        "learners reach. Recorded in manifests when above 1",
        json_schema_extra=documented(
            "a whole number in [1, 1000], or a mapping from protected value to one",
            demo="--propensity-ratio",
            plan="--propensity-ratio",
            takes="whole numbers >= 1",
        ),
    )
    accept_known_breach: list[KnownBreach] = Field(
        default_factory=list,
        validate_default=True,
        description="the acknowledgement of the models with a known breach this file chooses ([threat "
        "model](threat-model.md#models-with-a-known-breach)): `parts` for `partition_model: parts` or "
        "`algorithm: bottomup`, `paper` for `suppression_model: paper`, e.g. `[parts]` or `[parts, paper]`; `[]` "
        "with the defaults. Each release's manifest then records it (`accepted_known_breach`), and its report, "
        "the sign-off prompt and `serialpub audit` state the risk. The demo's `--partition-model`, `--algorithm` "
        "and `--suppression-model` write it",
        json_schema_extra=documented(
            "exactly the breachable models chosen: a missing one is refused with one line naming this setting "
            "(exit 2), and so is an acknowledgement of a model not in use or one listed twice",
            record="accepted_known_breach",
        ),
    )
    suppression_budget: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="`paper` model only: largest fraction of a snapshot's records that may be suppressed "
        "(removed) when generalization alone cannot meet the requirement; a release that needs more is refused "
        "(exit 2)",
        json_schema_extra=documented("must be 0 under `mechanism` or `topdown`", demo="--suppression-budget"),
    )

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
        problem = acknowledgement_problem(v, d.get("suppression_model"), d.get("algorithm"), d.get("partition_model"))
        if problem:
            raise PydanticCustomError("known_breach", problem)
        return v

    @model_validator(mode="after")
    def _consistent(self) -> ReleaseSettings:
        if self.strategy is Strategy.CONSTANT and self.k_prime is None:
            raise ValueError("strategy 'constant' needs k_prime")
        if self.strategy is Strategy.GEOMETRIC and self.alpha is None:
            raise ValueError("strategy 'geometric' needs alpha (> 1)")
        stray = [q for q in self.numeric if q not in self.quasi_identifiers]
        if stray:
            raise ValueError(
                f"numeric lists {quoted(stray[0])}, which is not a quasi-identifier; "
                "list only columns of quasi_identifiers"
            )
        if len(set(self.numeric)) != len(self.numeric):
            raise ValueError("numeric lists a column twice")
        if self.suppression_model is SuppressionModel.MECHANISM and self.suppression_budget > 0:
            # docs/threat-model.md: a suppressed record is still charged, so suppressing it
            # buys no privacy and loses the record
            raise ValueError(
                f"suppression_budget {self.suppression_budget:g} has no effect under suppression_model "
                "'mechanism' (a suppressed record still counts against its region, because an adversary "
                "who knows the algorithm can infer it); set suppression_budget: 0, or suppression_model: "
                "paper to reproduce paper 004's weaker published-count model"
            )
        if isinstance(self.propensity_ratio, dict) and isinstance(self.protected_values, list):
            stray = sorted(set(self.propensity_ratio) - set(self.protected_values))
            if stray:
                raise ValueError(
                    f"propensity_ratio lists {quoted(stray[0])}, which is not a protected value; "
                    "list only values of protected_values"
                )
        if self.algorithm is Algorithm.BOTTOMUP and self.partition_model is PartitionModel.PUBLISHED:
            raise ValueError(
                "partition_model 'published' with algorithm 'bottomup', whose cut search reads every cell's counts; "
                "use algorithm: topdown, or leave partition_model out (bottom-up: parts)"
            )
        if self.partition_test is PartitionTest.NOISY:
            eps = self.partition_epsilon
            if eps is None or not 0 < eps <= MAX_EPSILON:
                raise ValueError(
                    f"partition_test 'noisy' needs partition_epsilon in (0, {MAX_EPSILON:.4f}] (ln 2), got {eps!r}"
                )
            published = self.effective_partition_model is PartitionModel.PUBLISHED
            if self.algorithm is not Algorithm.TOPDOWN or not published:
                raise ValueError("partition_test 'noisy' needs algorithm: topdown and partition_model: published")
            if self.dilution is not Dilution.REGISTER:
                raise ValueError(
                    "partition_test 'noisy' needs dilution: register (its candidate split would read who is present)"
                )
        elif self.partition_epsilon is not None:
            raise ValueError(
                "partition_epsilon is set but partition_test is 'sound'; set partition_test: noisy "
                "or leave partition_epsilon out"
            )
        if self.split_rule is SplitRule.HISTORY and (
            self.algorithm is not Algorithm.TOPDOWN or self.dilution is not Dilution.REGISTER
        ):
            raise ValueError(
                "split_rule 'history' needs algorithm: topdown and dilution: register (under presence the "
                "statistics file it reads depends on who was present); set split_rule: widest"
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

    def recorded(self, **resolved: Any) -> dict[str, Any]:
        """The settings as a release's row (:class:`state.params.DraftParams`) and its
        manifest record them, under their :func:`record_key`: each field's value, or the one
        in ``resolved`` (by field name) where the draft resolved it (``protected_values:
        all`` into the values, the QIs in the inputs' order). ``after_k_prime`` is null
        under a strategy other than the constant one, ``partition_model`` is
        :attr:`effective_partition_model`, and ``accepted_known_breach`` is left out when
        none is taken, and so are ``partition_test``/``partition_epsilon`` under the sound
        test, ``split_rule`` under ``widest`` and ``propensity_ratio`` when it is 1, so that
        the default series' manifests keep their keys.

        Raises:
            KeyError: a key of ``resolved`` that is no setting (a programming error).
        """
        # the release settings only, of a configuration too (a subclass with the workspace's own)
        unknown = set(resolved) - set(ReleaseSettings.model_fields)
        if unknown:
            raise KeyError(f"no release setting {sorted(unknown)}")
        values = {name: resolved.get(name, getattr(self, name)) for name in ReleaseSettings.model_fields}
        if self.strategy is not Strategy.CONSTANT:
            values["after_k_prime"] = None
        values["partition_model"] = resolved.get("partition_model", self.effective_partition_model)
        if not values["accept_known_breach"]:
            del values["accept_known_breach"]
        if values["partition_test"] is not PartitionTest.NOISY:  # the sound test's series keep their keys
            del values["partition_test"], values["partition_epsilon"]
        if values["split_rule"] is SplitRule.WIDEST:  # and the widest rule's
            del values["split_rule"]
        values["propensity_ratio"] = recorded_ratio(values["propensity_ratio"])
        if values["propensity_ratio"] is None:  # so do the uniform charge's
            del values["propensity_ratio"]
        return {record_key(name): value for name, value in values.items()}


def recorded_ratio(setting: int | dict[str, int]) -> int | dict[str, int] | None:
    """``propensity_ratio`` as releases record it: None for the uniform charge (the key is
    then left out), a number above 1, or the mapping's values above 1, sorted (a value at 1
    is charged as an unlisted one)."""
    if isinstance(setting, dict):
        setting = {v: r for v, r in sorted(setting.items()) if r > 1} or 1
    return None if setting == 1 else setting


def record_key(name: str) -> str:
    """The key a release's row and manifest record the setting ``name`` under."""
    field = ReleaseSettings.model_fields[name]
    return str(_extra(field).get("record") or field.alias or name)


def _options(command: str) -> dict[str, str]:
    fields = ReleaseSettings.model_fields.items()
    return {f.alias or name: str(_extra(f)[command]) for name, f in fields if command in _extra(f)}


#: every recorded key, the manifest's spelling (:data:`state.params.SETTINGS` must be these,
#: and the optional ones)
RECORDED = tuple(record_key(name) for name in ReleaseSettings.model_fields)
#: the recorded keys written only when a release uses them (:meth:`ReleaseSettings.recorded`),
#: so that the default series' manifests keep their keys
OPTIONAL_RECORDED = ("accepted_known_breach", "partition_test", "partition_epsilon", "split_rule", "propensity_ratio")
#: setting (its ``serialpub.yaml`` key) -> its ``serialpub demo`` option
DEMO_OPTIONS = _options("demo")
#: setting (its ``serialpub.yaml`` key) -> its ``serialpub plan`` option: the plan's grid axes
PLAN_OPTIONS = _options("plan")
#: setting (its ``serialpub.yaml`` key) -> what the plan's grid takes for it
PLAN_TAKES = _options("takes")
