"""The commented ``serialpub.yaml`` of a configuration, written from the settings models.

Each setting's description is its field's ``description`` in :mod:`serialpub.config` (each
section's, its model's docstring), the text the tables of docs/configuration.md show too
(:mod:`serialpub.config_docs`); here it becomes a comment above the setting, Markdown
links reduced to their text. The file reads back as the same configuration
(:func:`serialpub.config.load_config`).
"""

from __future__ import annotations

import inspect
import json
import math
import re
import textwrap
from collections.abc import Iterator, Mapping
from typing import get_origin

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from serialpub.config import Config

#: the comments' width, the "# " and the indentation included
WIDTH = 90

HEADER = (
    "serialpub configuration: one dataset published as a series of releases. Paths are relative to this "
    "file. Every setting is checked when a command starts; docs/configuration.md describes each."
)

#: line breaks and what YAML does not read as it is written
_UNPRINTABLE = re.compile("[\n\r\x7f-\x9f\u2028\u2029\ufeff]")
_LINK = re.compile(r"\[([^\]]+)\]\([^)\s]+\)")


def extra(field: FieldInfo) -> dict[str, str]:
    """A field's ``json_schema_extra`` (:func:`serialpub.io.release_settings.documented`), or nothing."""
    found = field.json_schema_extra
    return {k: str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def section_text(model: type[BaseModel]) -> str:
    """A section model's docstring on one line (Markdown)."""
    return " ".join((inspect.getdoc(model) or "").split())


def settings(model: type[BaseModel]) -> Iterator[tuple[str, str, FieldInfo, type[BaseModel] | None]]:
    """(field name, key, field, section model or None) of each setting of ``model``, in the
    model's order."""
    for name, field in model.model_fields.items():
        kind = field.annotation
        section = kind if isinstance(kind, type) and issubclass(kind, BaseModel) else None
        yield name, field.alias or name, field, section


def dotted_keys(model: type[BaseModel] = Config, prefix: str = "") -> list[str]:
    """Every setting's key, a section's settings as ``section.key``."""
    found = []
    for _, k, _, section in settings(model):
        found.append(prefix + k)
        if section is not None:
            found += dotted_keys(section, f"{prefix}{k}.")
    return found


def bounds(field: FieldInfo) -> str:
    """The field's own bounds (numeric, length, pattern) as the docs' validation column
    writes them, e.g. ``0 ≤ value ≤ 1``; empty when it has none."""
    found = {a: getattr(m, a) for m in field.metadata for a in ("ge", "gt", "le", "lt", "min_length", "pattern")
             if getattr(m, a, None) is not None}  # fmt: skip
    lower = next(((sign, found[a]) for a, sign in (("ge", "≤"), ("gt", "<")) if a in found), None)
    upper = next(((sign, found[a]) for a, sign in (("le", "≤"), ("lt", "<")) if a in found), None)
    parts = []
    if lower and upper:
        parts.append(f"{lower[1]} {lower[0]} value {upper[0]} {upper[1]}")
    elif lower:
        parts.append(f"{'≥' if lower[0] == '≤' else '>'} {lower[1]}")
    elif upper:
        parts.append(f"{upper[0]} {upper[1]}")
    if "min_length" in found:
        parts.append("at least one" if get_origin(field.annotation) is list else "not empty")
    if "pattern" in found:
        parts.append(f"matches `{found['pattern']}`")
    return "; ".join(parts)


def checked(field: FieldInfo) -> str:
    """Everything checked of a setting: its bounds, then its documented rules (Markdown)."""
    return "; ".join(filter(None, [bounds(field), extra(field).get("validation")]))


def plain(markdown: str) -> str:
    """``markdown`` as a comment says it: a link as its text, without code or bold marks."""
    return _LINK.sub(r"\1", markdown).replace("**", "").replace("`", "")


def yaml_value(value: object) -> str:
    """``value`` (JSON data) as one line of YAML that :func:`serialpub.io.settings_yaml.read_yaml`
    reads back as it is: PyYAML quotes every string YAML 1.1 would read as something else."""
    text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=math.inf)
    text = text.removesuffix("\n...\n").rstrip("\n")
    if not _UNPRINTABLE.search(text):
        return text
    # a string with a line break (YAML's include NEL and the Unicode separators), which
    # PyYAML folds over lines that an indented section could not hold: JSON writes it on one
    # line, and YAML reads JSON once the characters it does not take as they are are escaped
    return _UNPRINTABLE.sub(lambda m: f"\\u{ord(m[0]):04x}", json.dumps(value, ensure_ascii=False))


def _comment(text: str, indent: str) -> list[str]:
    lines = textwrap.wrap(plain(text), WIDTH - len(indent) - 2, break_long_words=False, break_on_hyphens=False)
    return [f"{indent}# {line}" for line in lines]


def _sentence(text: str) -> str:
    """A description (a table cell's phrase) as a sentence of a comment."""
    if text[:1].isascii() and text[:1].islower() and text[1:2] != "'":  # not a symbol: k', α, ℓ
        text = text[0].upper() + text[1:]
    return text if text.endswith(".") else text + "."


def _section(model: BaseModel, prefix: str, notes: Mapping[str, str], depth: int) -> list[str]:
    indent = "  " * depth
    values = model.model_dump(mode="json", by_alias=True)
    out: list[str] = []
    for name, k, field, section in settings(type(model)):
        if depth == 0:
            out.append("")
        if section is not None:
            out += _comment(section_text(section), indent)
        else:
            out += _comment(_sentence(field.description or ""), indent)
            if checked(field):
                out += _comment(f"Checked: {checked(field)}.", indent)
        if prefix + k in notes:
            out += _comment(notes[prefix + k], indent)
        value = values[k]
        if section is not None:
            out += [f"{indent}{k}:", *_section(getattr(model, name), f"{prefix}{k}.", notes, depth + 1)]
        elif value is None and "example" in extra(field):
            out.append(f"{indent}# {k}: {extra(field)['example']}")
        else:
            out.append(f"{indent}{k}: {yaml_value(value)}")
    return out


def render_config(config: Config, notes: Mapping[str, str] | None = None) -> str:
    """The text of a ``serialpub.yaml`` holding ``config``: every setting, each with its
    description and what is checked as a comment above it, and sections indented.

    Args:
        config: the settings written; :func:`serialpub.config.load_config` of the text
            gives them back. A null setting that has an example (a database URL, the
            sensitive domain file, report categories) is written commented out with it.
        notes: a further comment for a setting, by its dotted key as written in the file
            (``sign_off.auto_approve``, ``protected_values``): why this file chose its value.

    Raises:
        ValueError: a note names no setting.
    """
    notes = dict(notes or {})
    unknown = sorted(set(notes) - set(dotted_keys()))
    if unknown:
        raise ValueError(f"notes for {', '.join(unknown)}, which is no setting; use a key of {dotted_keys()}")
    return "\n".join([*_comment(HEADER, ""), *_section(config, "", notes, 0)]) + "\n"
