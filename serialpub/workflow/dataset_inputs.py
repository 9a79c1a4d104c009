"""A dataset's small inputs, read once per run and frozen (docs/design.md section 6): the QI
hierarchies, the sensitive domain, the protected values and the privacy parameters. They
may change between releases (docs/design.md section 10): :func:`input_stamp` tells when.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from anonymizer.hierarchy import Hierarchy
from anonymizer.intervals import release_hierarchies
from anonymizer.privacy import PropensityRatio, ratio_by_value
from anonymizer.release import PrivacyParams
from anonymizer.settings import Strategy
from checks.input_suites import DatasetColumns
from serialpub.config import Workspace
from serialpub.errors import InputError, quoted
from serialpub.io.hierarchies import read_domain, read_hierarchies, read_sensitive_hierarchy, spelling_hint


@dataclass(frozen=True)
class DatasetInputs:
    """What the configuration and the hierarchy folder say of a dataset.

    Attributes:
        qis: the quasi-identifiers, in configuration order.
        hierarchies: the declared hierarchy of each QI.
        numeric: the QIs declared numeric (their leaves are numbers).
        hierarchy_sources: the file each QI's hierarchy was read from, as the suites name it.
        sensitive_hierarchy: the sensitive attribute's hierarchy, if it has one.
        sensitive_domain: the sensitive attribute's values.
        protected: the protected values, in configuration order (all of the domain for ``all``).
        params: the privacy parameters of the anonymizer.
        id_column, sensitive: the identifier column and the sensitive attribute.
    """

    qis: list[str]
    hierarchies: dict[str, Hierarchy]
    numeric: list[str]
    hierarchy_sources: dict[str, str]
    sensitive_hierarchy: Hierarchy | None
    sensitive_domain: list[str] | None
    protected: list[str]
    params: PrivacyParams
    id_column: str
    sensitive: str

    @property
    def columns(self) -> DatasetColumns:
        """The columns the register and the snapshots must have, with their hierarchies and
        the sensitive domain (the input suites', :mod:`checks.input_suites`)."""
        return DatasetColumns(
            self.id_column, self.qis, self.hierarchies, self.sensitive, self.sensitive_domain, self.hierarchy_sources
        )

    def read_hierarchies(self, table: pd.DataFrame) -> dict[str, Hierarchy]:
        """The hierarchies a release table of this dataset is read with (its intervals as
        nodes, :func:`anonymizer.intervals.release_hierarchies`)."""
        return release_hierarchies(self.hierarchies, self.numeric, table)


def workspace_ratio(ws: Workspace, protected: Sequence[str]) -> PropensityRatio:
    """The workspace's ``propensity_ratio`` as the charge takes it, over its ``protected``
    values in their order (:func:`anonymizer.privacy.ratio_by_value`).

    Raises:
        InputError: the setting names a value that is not protected (one line naming the
            file, the setting and the values it may name)."""
    try:
        return ratio_by_value(ws.config.propensity_ratio, protected)
    except ValueError as exc:
        raise InputError(f"{ws.root / 'serialpub.yaml'}: {exc}") from None


def read_dataset_inputs(ws: Workspace) -> DatasetInputs:
    """Read the QI hierarchies and the sensitive domain of ``ws``.

    Raises:
        InputError: a QI declared numeric whose hierarchy has non-numeric leaves, no
            sensitive domain, protected values or report categories outside the domain.
    """
    cfg = ws.config
    qis = cfg.quasi_identifiers
    hierarchies = read_hierarchies(ws.hierarchy_dir, qis)
    numeric = list(cfg.numeric)
    for q in numeric:
        if not hierarchies[q].numeric:
            raise InputError(
                f"{ws.root / 'serialpub.yaml'}: setting 'numeric' lists {q!r}, but some leaves of "
                f"{ws.hierarchy_dir / f'{q}.csv'} are not numbers; remove {q!r} from 'numeric'"
            )
    sensitive_hierarchy, sensitive_domain, protected = _sensitive_inputs(ws)
    params = PrivacyParams(
        ell=cfg.ell,
        strategy=cfg.strategy,
        k_prime=cfg.k_prime if cfg.strategy is Strategy.CONSTANT else None,
        alpha=cfg.alpha if cfg.strategy is Strategy.GEOMETRIC else None,
        guarantee=cfg.guarantee,
        suppression_model=cfg.suppression_model,
        algorithm=cfg.algorithm,
        after_k_prime=cfg.after_k_prime,
        partition_model=cfg.effective_partition_model,
        partition_test=cfg.partition_test,
        partition_epsilon=cfg.partition_epsilon,
        split_rule=cfg.split_rule,
        propensity_ratio=workspace_ratio(ws, protected),
    )
    sources = {q: str(ws.hierarchy_dir / f"{q}.csv") for q in qis}
    return DatasetInputs(
        qis,
        hierarchies,
        numeric,
        sources,
        sensitive_hierarchy,
        sensitive_domain,
        protected,
        params,
        cfg.id_column,
        cfg.sensitive,
    )


def input_stamp(ws: Workspace) -> tuple[object, ...]:
    """(inode, size, mtime) of the register and the hierarchy folder's files (a SQL
    register has no stamp that could stay equal: it is read again,
    :meth:`serialpub.io.sources.InputSource.stamp`)."""
    stamps: list[object] = [ws.register_source.stamp()]
    for p in sorted(ws.hierarchy_dir.glob("*.csv")):
        try:
            st = p.stat()
        except OSError:
            stamps.append(None)
            continue
        stamps.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(stamps)


def _sensitive_inputs(ws: Workspace) -> tuple[Hierarchy | None, list[str], list[str]]:
    """The sensitive hierarchy (if any), the sensitive domain and the protected values."""
    cfg = ws.config
    config_file = ws.root / "serialpub.yaml"
    sens_path = ws.hierarchy_dir / f"{cfg.sensitive}.csv"
    sensitive_domain: list[str] | None = None
    sensitive_hierarchy: Hierarchy | None = None
    domain_source = str(sens_path)
    if sens_path.exists():
        sensitive_hierarchy = read_sensitive_hierarchy(sens_path, cfg.sensitive)
        sensitive_domain = list(sensitive_hierarchy.leaves)
        domain_source = f"leaves of {sens_path}"
    elif cfg.sensitive_domain_file is not None:
        domain_path = ws.path(cfg.sensitive_domain_file)
        sensitive_domain = read_domain(domain_path)
        domain_source = str(domain_path)
    if sensitive_domain is None:
        # without the domain a value spelled another way ('HIV ' for 'hiv') would pass as
        # unprotected and be published as it is (docs/threat-model.md)
        raise InputError(
            f"{config_file}: protecting values of {quoted(cfg.sensitive)} needs its domain; add "
            f"{sens_path} (its hierarchy) or set sensitive_domain: to a file with one value per line"
        )
    if cfg.protected_values == "all":
        protected = list(sensitive_domain)
    else:
        protected = list(dict.fromkeys(cfg.protected_values))
        unknown = [v for v in protected if v not in sensitive_domain]
        if unknown:
            hints = ", ".join(f"{quoted(v)}{spelling_hint(v, sensitive_domain)}" for v in unknown[:3])
            more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
            raise InputError(
                f"{config_file}: setting 'protected_values': {hints}{more} not in the domain of "
                f"{quoted(cfg.sensitive)} ({domain_source}); use the domain's spelling"
            )
    for name, values in (cfg.report.categories or {}).items():
        unknown = [v for v in values if v not in sensitive_domain]
        if unknown:
            raise InputError(  # the name as the setting's path spells it, bounded as a quoted value is
                f"{config_file}: report.categories.{quoted(name)[1:-1]} names {quoted(unknown[0])}"
                f"{f' and {len(unknown) - 1} more' if len(unknown) > 1 else ''}, not value(s) of "
                f"{quoted(cfg.sensitive)} (leaves of {sens_path}); fix the category or remove it"
            )
    return sensitive_hierarchy, sensitive_domain, protected
