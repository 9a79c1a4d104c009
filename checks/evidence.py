"""Validation results as evidence next to a release: ``validation.json`` (every suite's
full Great Expectations result, with checksums) and ``validation.html`` (the same, for
a person: one table per suite, failed expectations first, each with its explanation).

The manifest records the sha256 of ``validation.json``, so what the approver saw and
what was published are tied together.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, select_autoescape

from checks.gx import SuiteResult

JSON_FILE = "validation.json"
HTML_FILE = "validation.html"

_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Validation of {{ title }}</title>
<style>
 body { font-family: system-ui, sans-serif; margin: 2rem; color: #222; max-width: 70rem; }
 h1 { font-size: 1.4rem; } h2 { font-size: 1.1rem; margin-top: 2rem; }
 .pass { color: #11602a; } .fail { color: #a4141b; font-weight: bold; }
 table { border-collapse: collapse; width: 100%; margin-top: .5rem; }
 th, td { border: 1px solid #ccc; padding: .3rem .5rem; text-align: left; vertical-align: top; font-size: .9rem; }
 th { background: #f3f3f3; } code { font-size: .85rem; }
 .summary td:first-child { width: 12rem; }
</style></head><body>
<h1>Validation of {{ title }}</h1>
<p>Verdict: <span class="{{ 'pass' if success else 'fail' }}">{{ 'PASSED' if success else 'FAILED' }}</span>
 &middot; {{ created }} &middot; {{ suites|length }} suite(s), {{ n_expectations }} expectation(s),
 {{ n_failed }} failed</p>
<table class="summary"><tr><th>suite</th><th>verdict</th><th>expectations</th><th>sha256 of the result</th></tr>
{% for s in suites %}<tr><td>{{ s.suite }}</td>
 <td class="{{ 'pass' if s.success else 'fail' }}">{{ 'passed' if s.success else 'failed' }}</td>
 <td>{{ s.rows|length }}</td><td><code>{{ s.sha256 }}</code></td></tr>{% endfor %}
</table>
{% for s in suites %}
<h2>{{ s.suite }}:
 <span class="{{ 'pass' if s.success else 'fail' }}">{{ 'passed' if s.success else 'failed' }}</span></h2>
{% if s.failures %}<p>Failed:</p><ul>{% for f in s.failures %}<li class="fail">{{ f }}</li>{% endfor %}</ul>{% endif %}
<table><tr><th>expectation</th><th>what it checks</th><th>verdict</th><th>observed</th></tr>
{% for r in s.rows %}<tr><td><code>{{ r.type }}</code></td><td>{{ r.description }}</td>
 <td class="{{ 'pass' if r.success else 'fail' }}">{{ 'met' if r.success else 'NOT met' }}</td>
 <td>{{ r.observed }}</td></tr>{% endfor %}
</table>
{% endfor %}
<!-- commitment nonce {{ nonce }} -->
</body></html>
"""


def _rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for r in sorted(result.get("results", []), key=lambda r: bool(r.get("success"))):  # failures first
        cfg = r.get("expectation_config", {})
        kwargs = cfg.get("kwargs", {})
        res = r.get("result") or {}
        if "unexpected_count" in res:
            observed = f"{res['unexpected_count']} unexpected of {res.get('element_count', '?')}"
        elif "observed_value" in res:
            observed = str(res["observed_value"])
        else:
            observed = ""
        what = cfg.get("description") or cfg.get("type", "")
        if "column" in kwargs:
            what = f"{what} (column {kwargs['column']})"
        rows.append(
            {"type": cfg.get("type", ""), "description": what, "success": bool(r.get("success")), "observed": observed}
        )
    return rows


def write_evidence(folder: Path, title: str, results: list[SuiteResult]) -> str:
    """Write ``validation.json`` and ``validation.html`` into ``folder``.

    Args:
        folder: the release's (staging) folder.
        title: what was validated, e.g. "adult release 7 (period 2024-H1)".
        results: the suites' results.

    Returns:
        the sha256 of ``validation.json`` as written.
    """
    created = datetime.now(UTC).isoformat(timespec="seconds")
    payload = {
        # the manifest records this file's sha256 in public; the suites describe the raw
        # snapshot, so a secret random nonce makes that checksum a hiding commitment (a
        # guessed world cannot be confirmed by hashing its evidence; docs/threat-model.md)
        "nonce": secrets.token_hex(32),
        "title": title,
        "created": created,
        "success": all(r.success for r in results),
        "suites": [
            {"suite": r.suite, "success": r.success, "sha256": r.sha256, "failures": r.failures, "result": r.result}
            for r in results
        ],
    }
    text = json.dumps(payload, indent=1, sort_keys=True, default=str) + "\n"
    (folder / JSON_FILE).write_text(text, encoding="utf-8")
    row_lists = [_rows(r.result) for r in results]
    suites = [
        {"suite": r.suite, "success": r.success, "sha256": r.sha256, "failures": r.failures, "rows": rows}
        for r, rows in zip(results, row_lists, strict=True)
    ]
    html = (
        Environment(autoescape=select_autoescape(default=True))
        .from_string(_TEMPLATE)
        .render(
            title=title,
            created=created,
            success=payload["success"],
            suites=suites,
            n_expectations=sum(len(rows) for rows in row_lists),
            n_failed=sum(not row["success"] for rows in row_lists for row in rows),
            nonce=payload["nonce"],
        )
    )
    (folder / HTML_FILE).write_text(html, encoding="utf-8")
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
