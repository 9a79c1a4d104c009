"""``serialpub state verify``: rebuild the state from public material and compare.

The statistics file (paper 004, §7; docs/design.md section 4) is the publisher's memory of every
release: per (individual o, protected value s) the survival product Π_j(1 - n_{j,s}/n_j)
and the number of releases that linked o to s. If it were lost, corrupted or edited, the
next release would be computed against a wrong history and the global guarantee would no
longer hold. :func:`verify_state` rebuilds it from what the release store and the
workspace hold — the register, the hierarchies and the published ``release-NNNN/``
folders, whose manifests say ℓ, the protected values and the dilution mode — and compares:

- the release list: every release the database marks published has its folder, and every
  folder is in the database; seq, period and the sha256 of ``data.parquet`` agree between
  database, manifest and file (also the manifest's own sha256 and the register's and
  hierarchies' sha256 recorded at publication);
- per release, the group figures the database recorded (regions, n_j, n_{j,s});
- per (individual, protected value), the survival product (relative tolerance 1e-12:
  the two computations may round in a different order) and the linked count of
  :meth:`state.store.StateStore.latest_statistics`.

Candidates follow docs/design.md section 1: under register dilution every register individual in a
group's region; under presence dilution the individuals present in that period, read from
the snapshot whose path the release's database row records (``params["snapshot"]``). When
that file is gone, the pairs the release could have linked are reported as "cannot verify
without the snapshot" instead of being compared.

Everything is vectorized over the distinct register QI combinations and over history
classes, never over individuals one by one. The region geometry is the writer side's
:mod:`anonymizer.regions` (as for ``serialpub import-release``); this is a check of the
state's bookkeeping, not an independent recomputation of the geometry, which is the
audit's job (docs/design.md section 9).

Modules: :mod:`.series` runs the verification (:func:`verify_state`); :mod:`.stored` reads
the state database and the release folders; :mod:`.rebuild` rebuilds one release;
:mod:`.compare` compares the rebuilt state with the database; :mod:`.context` holds what
they share (the inputs read once, the state rebuilt so far); :mod:`.report` the outcome
(:class:`VerifyReport`, :class:`Difference`).
"""

from serialpub.analysis.verify.report import MAX_EXAMPLES, SURVIVAL_RTOL, UNVERIFIABLE, Difference, VerifyReport
from serialpub.analysis.verify.series import verify_state

__all__ = ["MAX_EXAMPLES", "SURVIVAL_RTOL", "UNVERIFIABLE", "Difference", "VerifyReport", "verify_state"]
