"""When two spellings of a sensitive value are one value (docs/configuration.md, "Spelling
of sensitive values").

serialpub compares sensitive values exactly: a snapshot value, a protected value or a
report category must be spelled as the domain spells it, else it is refused with the
domain's spelling as a hint. That is safe only if the domain never lists one value twice
under two spellings: with both ``hiv`` and ``HIV`` in the domain and only ``hiv``
protected, the records of ``HIV`` would be published unprotected, and with both protected
each would be counted apart, halving the breach probability of a person linked to both.

Two spellings are one value when their :func:`spelling_key` is equal: the Unicode
compatibility form (NFKC, so full-width ``ＨＩＶ`` is ``HIV``), case-folded, without
format characters (category Cf: zero-width spaces and joiners, soft hyphens, the byte-order
mark), runs of white space read as one space and surrounding white space removed.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

from serialpub.errors import InputError

#: what the error messages call the rule (docs/configuration.md)
RULE = "equal ignoring case, Unicode form, invisible characters and spaces"


def spelling_key(value: str) -> str:
    """The key two spellings of one value share (module docstring): ``spelling_key('HIV ')
    == spelling_key('hiv')``."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", value).casefold())
    visible = "".join(c for c in folded if unicodedata.category(c) != "Cf")
    return " ".join(visible.split())


def same_value_pairs(values: Iterable[str]) -> list[tuple[str, str]]:
    """Every (first spelling, other spelling) of ``values`` whose keys are equal, in the
    order the other spellings come; values equal as text are not pairs."""
    first: dict[str, str] = {}
    pairs = []
    for v in dict.fromkeys(values):
        key = spelling_key(v)
        if key in first:
            pairs.append((first[key], v))
        else:
            first[key] = v
    return pairs


def check_distinct_spellings(values: Iterable[tuple[int, str]], source: str, what: str) -> None:
    """Refuse a list of values (``(line, value)`` pairs from ``source``) holding one value
    under two spellings.

    Raises:
        InputError: naming both lines and both spellings, and the fix.
    """
    line_of: dict[str, tuple[int, str]] = {}
    for line, value in values:
        key = spelling_key(value)
        if key in line_of and line_of[key][1] != value:
            first_line, first = line_of[key]
            raise InputError(
                f"{source}, lines {first_line} and {line}: {_short(first)} and {_short(value)} are one {what} "
                f"spelled two ways ({RULE}); keep one spelling"
            )
        line_of.setdefault(key, (line, value))


def _short(value: str) -> str:
    """The value quoted, cut to 40 characters (a message stays one short line)."""
    return repr(value) if len(value) <= 40 else repr(value[:37] + "...")
