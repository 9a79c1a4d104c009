"""What ``serialpub state verify`` finds and how the command line shows it: :class:`Difference`
and :class:`VerifyReport` (docs/design.md sections 4 and 9)."""

from __future__ import annotations

from dataclasses import dataclass, field

#: Relative tolerance of the survival comparison.
SURVIVAL_RTOL = 1e-12
#: Examples kept per kind of difference (all are counted).
MAX_EXAMPLES = 5
UNVERIFIABLE = "cannot verify without the snapshot"


@dataclass
class Difference:
    """One kind of difference: how many instances and the first few, one line each."""

    kind: str
    count: int = 0
    examples: list[str] = field(default_factory=list)


@dataclass
class VerifyReport:
    """Outcome of :func:`verify_state`.

    Attributes:
        dataset: the configured dataset.
        releases_in_state: sequence numbers the database marks published.
        releases_on_disk: ``release-NNNN`` folders found in the release store.
        individuals: register individuals (N).
        values: protected values compared (union of the manifests' and the state's).
        pairs_compared: (individual, value) pairs compared, N x len(values) minus the
            unverifiable ones.
        differences: one entry per kind of difference, in the order found.
        unverifiable: pairs a presence-mode release may have linked whose snapshot is
            gone, with examples (the releases).
        notes: facts that are not differences.
    """

    dataset: str
    releases_in_state: list[int] = field(default_factory=list)
    releases_on_disk: list[int] = field(default_factory=list)
    individuals: int = 0
    values: list[str] = field(default_factory=list)
    pairs_compared: int = 0
    differences: list[Difference] = field(default_factory=list)
    unverifiable: Difference = field(default_factory=lambda: Difference(UNVERIFIABLE))
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing differs and every pair could be verified."""
        return not self.differences and self.unverifiable.count == 0

    def add(self, kind: str, example: str, count: int = 1) -> None:
        """Count ``count`` instances of a kind of difference, keeping ``example``."""
        for d in self.differences:
            if d.kind == kind:
                break
        else:
            d = Difference(kind)
            self.differences.append(d)
        d.count += count
        if len(d.examples) < MAX_EXAMPLES:
            d.examples.append(example)

    def format(self) -> str:
        """A few lines for the command line, ending with the verdict."""
        state, disk = self.releases_in_state, self.releases_on_disk
        lines = [
            f"dataset {self.dataset}: {len(state)} published release(s) in the state database, "
            f"{len(disk)} release folder(s)",
            f"register: {self.individuals} individuals (in any register the releases used); "
            f"protected values: {len(self.values)}",
            f"pairs compared: {self.pairs_compared} (survival relative tolerance {SURVIVAL_RTOL:g}, linked exact)",
        ]
        if self.differences:
            total = sum(d.count for d in self.differences)
            lines.append(f"differences: {total} in {len(self.differences)} kind(s)")
            for d in self.differences:
                lines.append(f"  {d.kind}: {d.count}")
                lines.extend(f"    {e}" for e in d.examples)
                if d.count > len(d.examples):
                    lines.append(f"    ... {d.count - len(d.examples)} more")
        else:
            lines.append("differences: none")
        if self.unverifiable.count:
            lines.append(f"{UNVERIFIABLE}: {self.unverifiable.count} (individual, value) pair(s)")
            lines.extend(f"    {e}" for e in self.unverifiable.examples)
        lines.extend(f"note: {n}" for n in self.notes)
        if self.differences:
            lines.append("verdict: FAIL: the state differs from what the published releases give")
        elif self.unverifiable.count:
            lines.append("verdict: INCOMPLETE: no difference found, but some pairs could not be verified")
        else:
            lines.append("verdict: PASS: the state is what the published releases give")
        return "\n".join(lines)
