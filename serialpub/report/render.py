"""Write the reports: one self-contained HTML page (inline CSS and SVG, no scripts, no
external resources) and a JSON file of the same figures, for machines.

Release reports are written into the release's staging folder at validation, so they are
published with the release and the manifest records their checksums; the series report
is written next to the release folders and rewritten on demand.
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
from dataclasses import asdict
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from anonymizer.learners.figures import LearnerReport
from anonymizer.regions import PresenceShown
from serialpub import __version__
from serialpub.io.manifest import Manifest
from serialpub.known_breach import RISK
from serialpub.report import plots
from serialpub.report.measure import Measure
from serialpub.report.privacy import PrivacyFigures

HTML_FILE = "report.html"
JSON_FILE = "report.json"


def _figure(value: Any) -> str:
    """A number as the report prints it: integers with separators, floats to 4 significant
    digits (6 below 0.01), anything else as text."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e15):
        return f"{int(value):,}"
    if isinstance(value, float):
        if math.isinf(value):
            return "∞" if value > 0 else "−∞"
        if math.isnan(value):
            return str(value)
        return f"{value:.6g}" if abs(value) < 0.01 else f"{value:,.4g}" if abs(value) >= 1e4 else f"{value:.4g}"
    return str(value)


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("serialpub.report", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters["figure"] = _figure
    env.filters["exp"] = math.exp  # e^ε of the noisy split test's bound
    return env


def measure_records(measures: list[Measure]) -> list[dict[str, Any]]:
    """Measures as strict-JSON dicts (also the form the manifest keeps). An infinite value
    (e.g. "smallest c" when no c satisfies the condition) becomes ``"inf"``/``"-inf"``:
    JSON has no infinity."""
    rows = []
    for m in measures:
        row = asdict(m)
        if isinstance(m.value, float) and math.isinf(m.value):
            row["value"] = "inf" if m.value > 0 else "-inf"
        rows.append(row)
    return rows


def measures_from_records(rows: list[dict[str, Any]]) -> list[Measure]:
    """The inverse of :func:`measure_records`."""
    out = []
    for r in rows:
        value = r["value"]
        out.append(Measure(**{**r, "value": float(value) if isinstance(value, str) else value}))
    return out


def read_presence_shown(folder: Path) -> PresenceShown | None:
    """The ``presence_shown`` figures of the release report in ``folder`` (a staging or
    release folder), None when it has no report or one made before they existed.

    Raises:
        OSError, ValueError: a report that cannot be read or parsed (serialpub wrote it).
    """
    path = folder / JSON_FILE
    if not path.is_file():
        return None
    shown = json.loads(path.read_text(encoding="utf-8")).get("presence_shown")
    return None if shown is None else PresenceShown(**shown)


def learner_record(report: LearnerReport | None) -> dict[str, Any] | None:
    """The learning adversary's figures as report.json keeps them (None: no learner asked):
    ℓ, the (individual, protected value) pairs, the releases the learners were fitted on,
    the notes, and per learner (``uniform``, the charge, first) its largest P', the pair
    attaining it and that pair's uniform charge, the pairs above 1/ℓ, the largest P' per
    protected value and its seconds."""
    if report is None:
        return None
    inputs = report.inputs
    return {
        "ell": report.ell,
        "pairs": report.pairs,
        "releases": 0 if inputs is None else len(inputs.releases),
        "notes": list(report.notes),
        "learners": [
            {
                "name": f.name,
                "max_p": f.max_p,
                "max_value": f.max_value,
                "max_individual": f.max_individual,
                "max_uniform": f.max_uniform,
                "above": f.above,
                "max_per_value": dict(zip(report.values, f.max_per_value, strict=True)),
                "seconds": round(f.seconds, 3),
            }
            for f in report.learners
        ],
    }


def write_text(folder: Path, name: str, text: str) -> str:
    data = text.encode("utf-8")
    (folder / name).write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def report_plots(privacy: PrivacyFigures, presence: bool) -> dict[str, str]:
    """The report's two figures as inline SVG documents, by name (``breach``, ``groups``).
    They depend on the privacy figures only, so validation draws them on its second core
    while the release suites run (matplotlib's pyplot is used by one thread at a time)."""
    return {
        "breach": plots.to_svg(plots.breach_histogram(privacy.distribution)),
        "groups": plots.to_svg(plots.group_sizes(privacy.group_records, privacy.group_candidates, presence)),
    }


def write_release_report(
    folder: Path,
    manifest: Manifest,
    status: str,
    privacy: PrivacyFigures,
    presence: bool,
    figures: dict[str, str] | None = None,
) -> dict[str, str]:
    """Write ``report.html`` and ``report.json`` for one release into ``folder``.

    Args:
        manifest: the release's manifest with its ``validation`` section.
        status: how the release stands, in words (e.g. "awaiting sign-off").
        privacy: the figures from :func:`serialpub.report.privacy.privacy_figures`.
        presence: presence mode (n_j counts records, not candidates).
        figures: :func:`report_plots` of ``privacy`` and ``presence`` when the caller drew
            them already; drawn here when None.

    Returns:
        sha256 of each file written, by file name.
    """
    m = manifest.to_dict()  # as the file has it: the page shows the keys the release has
    at_draft = measures_from_records(m.get("measures", []))
    utility = [m for m in at_draft if m.family == "utility"]
    guarantee = [m for m in privacy.measures if m.source.startswith("Paper 004")]
    classical = [m for m in privacy.measures if not m.source.startswith("Paper 004")]
    classical += [m for m in at_draft if m.family != "utility"]
    validation = m["validation"]
    ok = bool(validation.get("success"))  # the suites' exact verdict, not a float comparison
    figures = report_plots(privacy, presence) if figures is None else figures
    # the manifest and the sign-off record these files' sha256 in public, and they hold
    # figures computed from the raw snapshot: a secret random nonce in each makes those
    # checksums hiding commitments (docs/threat-model.md, "Figures computed from the raw snapshot")
    nonce = secrets.token_hex(32)
    html = (
        environment()
        .get_template("release.html.j2")
        .render(
            nonce=nonce,
            m=m,
            status=status,
            version=__version__,
            ok=ok,
            validation=validation,
            dist=privacy.distribution,
            budget=privacy.budget,
            figures=figures,
            privacy_guarantee=guarantee,
            privacy_classical=classical,
            utility=utility,
            known_breach=[RISK[b] for b in manifest.accepted_known_breach],
            shown=privacy.presence_shown,
            learned=learner_record(privacy.learners),
        )
    )
    dist, shown = privacy.distribution, privacy.presence_shown
    record = {
        "format_version": 1,
        "nonce": nonce,
        "dataset": manifest.dataset,
        "release": manifest.release,
        "period": manifest.period,
        # as the report's verdict box: the figures hold only within such a model
        "accepted_known_breach": [str(b) for b in manifest.accepted_known_breach],
        "breach_distribution": {
            "pairs": dist.pairs,
            "max_p": dist.max_p,
            "mean_p": dist.mean_p,
            "near_bound": dist.near_bound,
            "near_fraction": dist.near_fraction,
            "above_bound": dist.above_bound,
            "ell": dist.ell,
            "edges": dist.edges.tolist(),
            "counts": dist.counts.tolist(),
        },
        "ratio_budget": None
        if privacy.budget is None
        else {
            "k_prime": privacy.budget.k_prime,
            "max_linked": privacy.budget.max_linked,
            "releases_left": privacy.budget.releases_left,
            "pairs_at_budget": privacy.budget.pairs_at_budget,
            "linked_histogram": privacy.budget.linked_histogram.tolist(),
        },
        "groups": {
            "count": int(privacy.group_records.size),
            "records_mean": float(privacy.group_records.mean()) if privacy.group_records.size else 0.0,
            "records_max": int(privacy.group_records.max()) if privacy.group_records.size else 0,
            "n_j_mean": float(privacy.group_candidates.mean()) if privacy.group_candidates.size else 0.0,
            "n_j_max": int(privacy.group_candidates.max()) if privacy.group_candidates.size else 0,
        },
        # the top-down search's account of what blocked its splits, per level (absent: the
        # bottom-up search, an import, a release drafted before it was recorded)
        "search_levels": m.get("search_levels"),
        # a function of the published groups and the public register: no raw-derived figure
        "presence_shown": None if shown is None else asdict(shown),
        # the learning adversary on the public releases so far and this one: reported, not the verdict
        "learners": learner_record(privacy.learners),
        "privacy": measure_records(privacy.measures + [m for m in at_draft if m.family != "utility"]),
        "utility": measure_records(utility),
    }
    return {
        HTML_FILE: write_text(folder, HTML_FILE, html),
        JSON_FILE: write_text(folder, JSON_FILE, json.dumps(record, indent=2, ensure_ascii=False) + "\n"),
    }
