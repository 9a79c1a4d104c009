"""What a staged release's manifest must say before it is signed (docs/compliance.md,
"What the publication checks").

A release waits in its staging folder between drafting, validation, sign-off and
publication, and anyone who can write there can edit its ``manifest.json``. Publication
signs the staged manifest, so it must first be the one serialpub validated and the
approver signed off. Two records of it are kept in the state:

- the release row itself: its number, period, settings (``params``: ℓ, strategy, guarantee,
  protected values, quasi-identifiers, ...), the figures staged with it (records, groups,
  suppressed, maximum breach probability, the data file's sha256), the validation results
  and the previous published release. :func:`differences` rebuilds those fields from the
  state and compares each with the staged manifest;
- the sha256 of every field of the manifest as serialpub last wrote it
  (``params.staged_manifest``, :func:`bind`), which names any other field edited since
  (``created``, ``register_marginals``, the inputs' checksums, the evidence's, ...).

Who prepared the release and whether four-eyes was on when it was drafted are read from the
release row and checked against the append-only audit log's draft entry
(:func:`preparation`), so a rewritten ``prepared_by`` is found before it is trusted.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from anonymizer import privacy
from anonymizer.settings import Guarantee, Strategy
from serialpub.io.manifest import FORMAT_VERSION, RAW_DERIVED_KEYS, Manifest
from serialpub.workflow.dataset_series import DatasetSeries
from state.models import Release
from state.store import OpenRelease, StateError

#: keys publication itself writes into the manifest (the sign-off, the hash chain and the
#: signing key): not part of what was validated
PUBLICATION_KEYS = ("sign_off", "previous_manifest_sha256", "signing_key")


def _bound(manifest: Manifest) -> dict[str, Any]:
    """The manifest's keys that validation and sign-off vouch for: all but
    :data:`PUBLICATION_KEYS`, each suite's result sha256 left out (checked against the
    state's validation results on their own, and not published)."""
    data = manifest.to_dict()
    for key in PUBLICATION_KEYS:
        data.pop(key, None)
    for verdict in (data.get("validation") or {}).get("suites", {}).values():
        verdict.pop("sha256", None)
    return data


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def field_digests(manifest: Manifest) -> dict[str, str]:
    """sha256 (hex) of each key of :func:`_bound` ``manifest``, its value as sorted JSON."""
    return {key: _digest(value) for key, value in _bound(manifest).items()}


def bind(series: DatasetSeries, release_id: int, manifest: Manifest) -> None:
    """Record the fields of the manifest serialpub just wrote for the open release
    ``release_id`` (:meth:`state.store.StateStore.bind_staged_manifest`)."""
    series.store.bind_staged_manifest(release_id, field_digests(manifest))


def _staged_figures(series: DatasetSeries, release_id: int) -> dict[str, Any]:
    """The figures :meth:`state.store.StateStore.stage` recorded with the release row."""
    with Session(series.store.engine) as s:
        row = s.execute(
            select(Release.records, Release.groups, Release.suppressed, Release.max_breach, Release.data_sha256).where(
                Release.id == release_id
            )
        ).one()
    return {"records": row.records, "groups": row.groups, "suppressed": row.suppressed,
            "max_breach_probability": row.max_breach, "data_sha256": row.data_sha256}  # fmt: skip


def rebuilt_fields(series: DatasetSeries, rel: OpenRelease, validated: bool) -> dict[str, Any]:
    """The manifest's fields as the state records them for the open release ``rel``, by key
    (``sha256.data.parquet`` for the data file's; ``validation.<key>`` for the
    validation's when ``validated``). A setting a draft made by an older serialpub did not
    record is left out."""
    cfg, params = series.ws.config, rel.params
    published = series.store.published(cfg.dataset)
    figures = _staged_figures(series, rel.id)
    expected: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "dataset": cfg.dataset,
        "release": rel.seq,
        "period": rel.period,
        **params.recorded_settings(),
        "records": figures["records"],
        "groups": figures["groups"],
        "suppressed": figures["suppressed"],
        "max_breach_probability": figures["max_breach_probability"],
        "sha256.data.parquet": figures["data_sha256"],
        "previous_release": published[-1].seq if published else None,
        "imported": False,
        "source_sha256": None,
    }
    if "k_prime" in params.model_fields_set:
        k_prime = params.k_prime if params.strategy is Strategy.CONSTANT else None
        expected["constant_ratio_target"] = privacy.constant_ratio_target(params.l, k_prime) if k_prime else None
    if validated:
        expected["validation.success"] = True
        expected["validation.global_guarantee_checked"] = params.guarantee is Guarantee.GLOBAL
    return expected


def _staged_value(data: dict[str, Any], key: str) -> Any:
    if key == "sha256.data.parquet":
        return (data.get("sha256") or {}).get("data.parquet")
    if key.startswith("validation."):
        return (data.get("validation") or {}).get(key.removeprefix("validation."))
    return data.get(key)


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def differences(series: DatasetSeries, rel: OpenRelease, manifest: Manifest, validated: bool) -> list[str]:
    """Each field of the staged ``manifest`` of the open release ``rel`` that is not what
    serialpub staged and validated, one line each naming the field (empty when none is):
    first the fields rebuilt from the state (:func:`rebuilt_fields`), then any other field
    whose sha256 is not the one recorded when serialpub last wrote the manifest
    (:func:`bind`). ``validated``: the manifest must hold the validation."""
    found: list[str] = []
    data = _bound(manifest)
    named: set[str] = set()
    for key, expected in rebuilt_fields(series, rel, validated).items():
        actual = _staged_value(data, key)
        if key == "imported" and actual is None:
            actual = False  # absent: not imported
        if actual != expected:
            found.append(f"manifest.json field '{key}' is {_show(actual)}, the state recorded {_show(expected)}")
            named.add(key.split(".", 1)[0])
    recorded = rel.params.staged_manifest
    if recorded is not None:
        current = field_digests(manifest)
        for key in sorted(recorded.keys() | current.keys()):
            if key in named or (key in RAW_DERIVED_KEYS and key not in current):
                continue  # a publication interrupted after it rewrote the manifest dropped these
            if recorded.get(key) != current.get(key):
                what = "was removed" if key not in current else "was added" if key not in recorded else "was edited"
                found.append(f"manifest.json field '{key}' {what} after serialpub staged it")
    return found


def preparation_rewritten(series: DatasetSeries, rel: OpenRelease) -> str | None:
    """What of the open release ``rel``'s ``prepared_by`` and ``four_eyes`` is not what the
    append-only audit log recorded when it was drafted (one line), or None when both agree
    (or the log's entry predates their recording)."""
    drafts = [e for e in series.store.audit_log(series.dataset)
              if e["action"] == "draft" and e["release"] == rel.seq]  # fmt: skip
    logged = (drafts[-1]["detail"] or {}) if drafts else {}
    for key, value in (("prepared_by", rel.params.prepared_by), ("four_eyes", rel.params.four_eyes)):
        if key in logged and logged[key] != value:
            return (
                f"release {rel.seq} of {series.dataset!r}: the state's {key} ({value!r}) is not the "
                f"{logged[key]!r} the audit log recorded when it was drafted"
            )
    return None


def preparation(series: DatasetSeries, rel: OpenRelease) -> tuple[str | None, bool]:
    """Who prepared the open release ``rel`` and whether ``sign_off.four_eyes`` was on when it
    was drafted, as its release row records them; a draft made before the setting was
    recorded is held to today's configuration.

    Raises:
        StateError: the row's ``prepared_by`` or ``four_eyes`` is not what the append-only
            audit log recorded when the release was drafted (:func:`preparation_rewritten`).
    """
    rewritten = preparation_rewritten(series, rel)
    if rewritten:
        raise StateError(
            f"{rewritten}; the release row was changed outside serialpub: reject it "
            f"('serialpub reject --release {rel.seq}') and prepare it again"
        )
    preparer, four_eyes = rel.params.prepared_by, rel.params.four_eyes
    return preparer, series.ws.config.sign_off.four_eyes if four_eyes is None else four_eyes
