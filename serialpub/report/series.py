"""The series report: every published release of a dataset side by side, with the
localized baseline (per-release ℓ-diversity, what other tools guarantee) replayed on the
same snapshots so that the reader sees what the global guarantee prevents.

Figures per release come from its manifest and its ``report.json``; the baseline is
recomputed in memory by :func:`serialpub.workflow.baseline.localized_baseline` (nothing is
published or stored) from the snapshot files the state recorded for each release, and
rendered here. A release whose snapshot is gone (or that was imported) ends the baseline
there, and the report says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from serialpub import __version__
from serialpub.config import Workspace
from serialpub.errors import REFUSED, InputError
from serialpub.io import release_files
from serialpub.io.manifest import Manifest
from serialpub.known_breach import RISK, KnownBreach, release_span
from serialpub.report import plots
from serialpub.report.render import JSON_FILE, environment, write_text
from serialpub.report.wording.utility import BASELINE_ERROR, JOINT_ERROR, QUERY_ERROR, WEIGHTED_ERROR
from state.store import StateStore

SERIES_HTML = "series-report.html"
SERIES_JSON = "series-report.json"


@dataclass
class Baseline:
    """The localized baseline replayed on the published releases' snapshots.

    Attributes:
        max_p: largest breach probability over all releases after each replayed release.
        individuals_above: register individuals with some p > 1/ℓ after the last one.
        note: how far the replay went and why it stopped, if it did.
        seconds: time the replay took.
    """

    max_p: list[float] = field(default_factory=list)
    individuals_above: int = 0
    note: str = ""
    seconds: float = 0.0


def refusal(log: list[dict[str, Any]], last: int) -> dict[str, Any] | None:
    """The refusal that ends the series after release ``last``: when the state's last word
    on release ``last`` + 1 (``log``: :meth:`state.store.StateStore.audit_log`) is a failed
    attempt the anonymizer refused (:data:`serialpub.errors.REFUSED` in its reason), that
    release and the reason from those words on; None when it was not attempted, is open,
    or failed for another reason (a crash, a failed suite)."""
    entries = [e for e in log if e["release"] == last + 1]
    if not entries or entries[-1]["action"] != "failed":
        return None
    reason = str((entries[-1]["detail"] or {}).get("reason", ""))
    at = reason.find(REFUSED)
    return None if at < 0 else {"release": last + 1, "reason": reason[at:]}


def _release_row(directory: Path) -> dict[str, Any]:
    manifest = Manifest.read(directory / release_files.MANIFEST_FILE)
    report_path = directory / JSON_FILE
    report = json.loads(report_path.read_text(encoding="utf-8")) if report_path.is_file() else None
    sign_off = manifest.sign_off
    groups = (report or {}).get("groups", {})
    dist = (report or {}).get("breach_distribution", {})
    budget = (report or {}).get("ratio_budget") or {}
    shown = (report or {}).get("presence_shown") or {}  # absent from reports made before it existed
    records, n_groups = manifest.records, manifest.groups
    # the query errors: in the evidence (report.json) since published manifests leave the
    # raw-derived figures out; in the manifest of releases published before that
    utility = {m["name"]: m["value"] for m in (report or {}).get("utility", [])}
    query_error = utility.get(QUERY_ERROR, manifest.utility.average_relative_error if manifest.utility else None)
    weighted = utility.get(WEIGHTED_ERROR, manifest.utility.register_weighted_error if manifest.utility else None)
    joint = utility.get(JOINT_ERROR, manifest.utility.register_joint_error if manifest.utility else None)
    base = utility.get(BASELINE_ERROR, manifest.utility.histogram_baseline_error if manifest.utility else None)
    return {
        "release": manifest.release,
        "period": manifest.period,
        "records": records,
        "groups": n_groups,
        "suppressed": manifest.suppressed,
        "avg_records": records / n_groups if n_groups else 0.0,
        "avg_n_j": groups.get("n_j_mean"),
        "max_p": manifest.max_breach_probability,
        "near_bound": dist.get("near_bound"),
        "releases_left": budget.get("releases_left"),
        "in_no_region": shown.get("in_no_region"),  # register individuals the release shows absent
        "in_full_regions": shown.get("in_full_regions"),  # ... and shows present
        "query_error": query_error,
        "query_error_weighted": weighted,
        "query_error_joint": joint,  # the primary utility figure (docs/data-users.md)
        "query_error_baseline": base,
        "validation": manifest.validation.success if manifest.validation else None,
        "approver": sign_off.approver if sign_off else None,
        "automatic": sign_off.automatic if sign_off else None,
        "report": f"{directory.name}/report.html" if report else None,
        "l": manifest.l,
        "known_breach": [str(b) for b in manifest.known_breach()],  # as the audit's verdict names them
    }


def known_breaches(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every model with a known breach the series' releases were made under, in
    :class:`serialpub.known_breach.KnownBreach` order: ``model``, ``releases`` (their
    numbers), ``span`` (as ``1-3, 5``) and ``risk`` (one sentence); [] for a series made
    under the defaults alone. The audit's verdict names the same models ("PASS, with
    accepted known breach: parts"; docs/threat-model.md, "Models with a known breach")."""
    out = []
    for model in KnownBreach:
        releases = [r["release"] for r in rows if model in r["known_breach"]]
        if releases:
            out.append({"model": str(model), "releases": releases, "span": release_span(releases), "risk": RISK[model]})
    return out


def write_series_report(ws: Workspace, store: StateStore, base: Baseline | None, png_dir: Path | None = None) -> Path:
    """Write ``series-report.html`` and ``.json`` next to the dataset's release folders.

    Args:
        ws, store: the workspace and its state store.
        base: the localized baseline replayed on the published releases' snapshots
            (:func:`serialpub.workflow.baseline.localized_baseline`), or None to leave it out.
        png_dir: also write the figures there as ``series-breach.png`` and
            ``series-utility.png`` (for documents).

    Returns:
        the HTML file.

    Raises:
        InputError: nothing is published yet.
    """
    published = store.published(ws.config.dataset)
    if not published:
        raise InputError(f"dataset {ws.config.dataset!r}: nothing is published yet, so there is no series to report")
    rows = [_release_row(ws.dataset_dir / release_files.release_name(r.seq)) for r in published]
    ell = float(ws.config.ell)
    seqs = [r["release"] for r in rows]
    makers = {
        "breach": lambda: plots.series_breach(seqs, [r["max_p"] for r in rows], base.max_p if base else None, ell),
        "utility": lambda: plots.series_utility(
            seqs,
            [r["query_error"] for r in rows],
            [r["avg_records"] for r in rows],
            [r["query_error_joint"] for r in rows],
            [r["query_error_baseline"] for r in rows],
        ),
    }
    figures = {name: plots.to_svg(make()) for name, make in makers.items()}
    if png_dir is not None:
        png_dir.mkdir(parents=True, exist_ok=True)
        for name, make in makers.items():
            (png_dir / f"series-{name}.png").write_bytes(plots.to_png(make()))
    breaches = known_breaches(rows)
    refused = refusal(store.audit_log(ws.config.dataset), rows[-1]["release"])
    html = (
        environment()
        .get_template("series.html.j2")
        .render(
            dataset=ws.config.dataset,
            rows=rows,
            baseline=base,
            figures=figures,
            ell=ell,
            version=__version__,
            config=ws.config,
            known_breach=breaches,
            refused=refused,
        )
    )
    ws.dataset_dir.mkdir(parents=True, exist_ok=True)
    write_text(ws.dataset_dir, SERIES_HTML, html)
    record = {
        "format_version": 1,
        "dataset": ws.config.dataset,
        "known_breach": breaches,
        "releases": rows,
        "refused": refused,
        "baseline": None
        if base is None
        else {
            "guarantee": "localized",
            "max_p": base.max_p,
            "individuals_above_bound": base.individuals_above,
            "note": base.note,
        },
    }
    write_text(ws.dataset_dir, SERIES_JSON, json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    return ws.dataset_dir / SERIES_HTML
