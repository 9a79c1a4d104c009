"""Reading a settings file (``serialpub.yaml``) as YAML, bounded and without coercions
(docs/configuration.md, "How the file is read").

PyYAML's safe loader is kept for the syntax, with four changes:

- the file may be at most :data:`MAX_BYTES` long;
- aliases (``*name``) are refused: a few hundred bytes of nested aliases expand to
  gigabytes when the settings are walked (the "billion laughs"), and no setting needs one;
- only ``true`` and ``false`` are booleans: YAML 1.1 also reads ``yes``, ``no``, ``on``,
  ``off``, ``y`` and ``n`` (any case) as booleans, so ``auto_approve: yes`` would silently
  approve; here they stay text, which a boolean setting refuses;
- integers are decimal only: YAML 1.1 reads ``020`` as 16 (octal), ``1:30`` as 90
  (base 60) and ``0x10`` as 16; here they stay text, which a number setting refuses;
- a key given twice in one mapping is refused (YAML would keep the last).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from serialpub.errors import InputError

#: the largest settings file read (far above the size of the commented file 'serialpub demo' writes)
MAX_BYTES = 1 << 20

_BOOL = re.compile(r"^(?:true|false)$")
_INT = re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$")
# PyYAML's float pattern without base 60 and without '_' separators
_FLOAT = re.compile(
    r"^(?:[-+]?(?:[0-9]+)\.[0-9]*(?:[eE][-+]?[0-9]+)?|[-+]?\.[0-9]+(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_REPLACED = {"tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"}


class _SettingsLoader(yaml.SafeLoader):
    """The safe loader with the changes of the module docstring."""

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f"alias *{event.anchor} is not allowed in a settings file; write the value out",
                event.start_mark,
            )  # fmt: skip
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[object, object]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"setting {key!r} is given twice; keep one", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


# a copy of the safe loader's implicit resolvers, with booleans, integers and floats replaced
_SettingsLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _REPLACED]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_SettingsLoader.add_implicit_resolver("tag:yaml.org,2002:bool", _BOOL, list("tf"))
_SettingsLoader.add_implicit_resolver("tag:yaml.org,2002:int", _INT, list("-+0123456789"))
_SettingsLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))


def read_settings(path: Path) -> Any:
    """The YAML document in ``path``, read as the module docstring says.

    Returns:
        what the document holds (a mapping for a settings file; the caller checks).

    Raises:
        InputError: one line naming the file (and the line and column, for YAML): the file
            is missing, unreadable, larger than :data:`MAX_BYTES`, not UTF-8, not YAML,
            nested too deeply, or uses an alias or a key twice.
    """
    try:
        with path.open("rb") as f:
            content = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise InputError(f"{path}: configuration file not found; create one with 'serialpub demo' as a model") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read the configuration file ({exc.strerror or exc})") from None
    if len(content) > MAX_BYTES:
        raise InputError(
            f"{path}: the configuration file is larger than {MAX_BYTES // 1024} KiB, which no settings file "
            "needs; check that this is the right file"
        )
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None
    try:
        return yaml.load(text, Loader=_SettingsLoader)  # a safe loader, restricted further
    except yaml.MarkedYAMLError as exc:
        # one line: the problem and where it is (PyYAML's own text spans several lines)
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise InputError(f"{path}: not valid YAML ({where}{exc.problem or exc.context})") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML ({' '.join(str(exc).split())[:200]})") from None
    except RecursionError:
        raise InputError(f"{path}: not valid YAML (nested too deeply); a settings file nests a few levels") from None
