"""Reading a YAML file serialpub is given (``serialpub.yaml``, the grid of ``serialpub
plan``), bounded and without coercions (docs/configuration.md, "How the file is read").
Every YAML document the product reads goes through :func:`read_yaml`; writing YAML needs no
such care.

PyYAML's safe loader is kept for the syntax, with these changes:

- the file may be at most the caller's ``max_bytes`` long;
- aliases (``*name``) are refused before they are composed: a few hundred bytes of nested
  aliases expand to gigabytes when the document is walked (the "billion laughs"), and no
  setting needs one;
- explicit tags (``!!bool yes``, ``!!int 0x10``) are refused: they would bring back the
  coercions below, and no setting needs one;
- only ``true`` and ``false`` are booleans: YAML 1.1 also reads ``yes``, ``no``, ``on``,
  ``off``, ``y`` and ``n`` (any case) as booleans, so ``auto_approve: yes`` would silently
  approve; here they stay text, which a boolean setting refuses;
- integers are decimal only: YAML 1.1 reads ``020`` as 16 (octal), ``1:30`` as 90
  (base 60) and ``0x10`` as 16; here they stay text, which a number setting refuses;
- dates (``2025-01-01``), ``=`` and the merge key ``<<`` stay text, as in YAML 1.2;
- a key given twice in one mapping is refused (YAML would keep the last), and so is a key
  that is a list or a mapping.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from serialpub.errors import InputError, quoted

_BOOL = re.compile(r"^(?:true|false)$")
_INT = re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$")
# PyYAML's float pattern without base 60 and without '_' separators
_FLOAT = re.compile(
    r"^(?:[-+]?(?:[0-9]+)\.[0-9]*(?:[eE][-+]?[0-9]+)?|[-+]?\.[0-9]+(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
# the only implicit type of the safe loader kept as it is; bool, int and float are replaced
# below, and timestamps, '=' and '<<' are dropped (they stay text)
_KEPT = {"tag:yaml.org,2002:null"}


class _Refused(yaml.MarkedYAMLError):
    """What this loader refuses beyond YAML's syntax; its text quotes the file only through
    :func:`quoted`."""


class _Loader(yaml.SafeLoader):
    """The safe loader with the changes of the module docstring."""

    #: what messages call the document (set per file by :func:`read_yaml`)
    what = "YAML file"

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()
        if self.check_event(yaml.AliasEvent):
            alias = quoted(f"*{event.anchor}")
            raise _Refused(
                None, None, f"alias {alias} is not allowed in a {self.what}; write the value out", event.start_mark
            )
        tag = getattr(event, "tag", None)
        if tag is not None:
            raise _Refused(
                None,
                None,
                f"tag {quoted(tag)} is not allowed in a {self.what}; write the value without it",
                event.start_mark,
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[object, object]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                raise _Refused(None, None, "a key is a list or a mapping; a key is a name", key_node.start_mark)
            if key in seen:
                raise _Refused(None, None, f"setting {quoted(key)} is given twice; keep one", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


# a copy of the safe loader's implicit resolvers, with booleans, integers and floats replaced
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag in _KEPT]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver("tag:yaml.org,2002:bool", _BOOL, list("tf"))
_Loader.add_implicit_resolver("tag:yaml.org,2002:int", _INT, list("-+0123456789"))
_Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))


def read_yaml(path: Path, *, what: str, max_bytes: int, if_missing: str) -> Any:
    """The YAML document in ``path``, read as the module docstring says.

    Args:
        path: the file.
        what: what messages call it (``configuration file``, ``grid file``).
        max_bytes: the largest file read, in bytes; a larger one is refused unparsed.
        if_missing: the fix a missing file's message gives.

    Returns:
        what the document holds: None, text, a number, a boolean, or lists and mappings of
        them (the caller checks the shape).

    Raises:
        InputError: one line naming the file (and the line and column, for YAML): the file
            is missing, unreadable, larger than ``max_bytes``, not UTF-8, not YAML, nested
            too deeply, or uses an alias, a tag or a key twice.
    """
    try:
        with path.open("rb") as f:
            content = f.read(max_bytes + 1)
    except FileNotFoundError:
        raise InputError(f"{path}: {what} not found; {if_missing}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    if len(content) > max_bytes:
        raise InputError(
            f"{path}: the {what} is larger than {max_bytes // 1024} KiB, which no {what} needs; check that this is "
            "the right file"
        )
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None
    loader = _Loader(text)
    loader.what = what
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        # one line: the problem and where it is (PyYAML's own text spans several lines)
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = exc.problem or exc.context or ""
        raise InputError(
            f"{path}: not valid YAML ({where}{problem if isinstance(exc, _Refused) else _short(problem)})"
        ) from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML ({_short(' '.join(str(exc).split()))})") from None
    except RecursionError:
        raise InputError(f"{path}: not valid YAML (nested too deeply); a {what} nests a few levels") from None
    finally:
        loader.dispose()


def _short(problem: str) -> str:
    """PyYAML's own sentence, shortened by :func:`quoted` when it is long: only one that
    quotes the file (a tag handle, an anchor) can be."""
    return problem if len(problem) <= 120 else quoted(problem)
