"""The mechanism's settings as enumerations (docs/design.md sections 2-4).

Each is a :class:`enum.StrEnum`, so a member equals its spelling (``Strategy.CONSTANT ==
"constant"``), is written to JSON and YAML as that spelling, and a configuration or
manifest holding any other spelling is refused when it is parsed, not compared against
later.
"""

from __future__ import annotations

import math
from enum import StrEnum

#: the environment variable that runs every step of a release in turn (``1``) or overlapped
#: (``0``), over the configuration's ``sequential`` setting (:mod:`anonymizer.overlap`)
SEQUENTIAL_ENV = "SERIALPUB_SEQUENTIAL"
#: the largest ε of ``partition_test: noisy``: e^ε = 2 at most (:mod:`anonymizer.noisy_split`)
MAX_EPSILON = math.log(2.0)


class Strategy(StrEnum):
    """How ratio targets are set from the releases a pair was linked in (paper 004, §6)."""

    CONSTANT = "constant"  # §6.1: the same ratio for k' releases
    GEOMETRIC = "geometric"  # §6.2: targets grow by α with each linked release


class AfterKPrime(StrEnum):
    """What the constant-ratio strategy does for a pair past k' linked releases
    (docs/design.md section 3)."""

    RENEW = "renew"  # the unspent budget spread over k' more releases
    STOP = "stop"  # paper 004 §6.1: no further release may link the pair


class Guarantee(StrEnum):
    """Which guarantee a release is checked for (paper 004, §3)."""

    GLOBAL = "global"  # over all releases: the product
    LOCALIZED = "localized"  # per release only: the baseline that leaks


class Dilution(StrEnum):
    """Who counts as a candidate of a QI-group (paper 004, §5; docs/design.md section 2)."""

    REGISTER = "register"  # every register individual whose QIs the group covers
    PRESENCE = "presence"  # only the individuals present in the snapshot


class SuppressionModel(StrEnum):
    """What the adversary is assumed to know about suppressed records
    (docs/design.md section 1)."""

    MECHANISM = "mechanism"  # knows the algorithm: a suppressed record is still charged
    PAPER = "paper"  # paper 004's weaker model: suppressed records are not charged


class Algorithm(StrEnum):
    """The search that forms a release's QI-groups (docs/design.md section 4)."""

    TOPDOWN = "topdown"  # multidimensional partitioning (paper 004 §7's top-down remark)
    BOTTOMUP = "bottomup"  # paper 004 §7's bottom-up generalization, for reproduction


class PartitionModel(StrEnum):
    """What the top-down search's split decisions may read (docs/threat-model.md, "Residual
    risk: the partition as evidence")."""

    PUBLISHED = "published"  # only counts the release publishes: the partition is no evidence
    PARTS = "parts"  # each part's own counts: finer groups, but a refused split is evidence


class PartitionTest(StrEnum):
    """How the top-down search admits a split (docs/anonymization.md, "partition_test: noisy")."""

    SOUND = "sound"  # every part meets its requirement for every placement of its region's counts
    NOISY = "noisy"  # where the sound test admits nothing: one public candidate, a randomized test (e^ε bound)


class SplitRule(StrEnum):
    """Which admissible split the top-down search takes (docs/anonymization.md, "Where the
    cuts fall"); the admission test is the same under both."""

    WIDEST = "widest"  # the QI with the widest node (Mondrian's rule), blind to the values
    HISTORY = "history"  # the largest gap between the parts' rates estimated from the published history
