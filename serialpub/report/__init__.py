"""Release and series reports for the compliance officer and the data's users (docs/reports.md).

- :mod:`.privacy`: the privacy figures of a staged release, recomputed from its files,
  the register and the state (not from the anonymizer's memory).
- :mod:`.utility`: the utility figures of a draft, computed when it is made (they need the
  raw snapshot's link between records and groups, which the published files do not keep)
  and recorded in its manifest.
- :mod:`.wording`: how every measure is named, explained and cited (the measure modules of
  :mod:`anonymizer.measures` return numbers only), one module per family of measures.
- :mod:`.series`: figures across the published releases, with the localized baseline.
- :mod:`.plots`: the matplotlib figures, as inline SVG.
- :mod:`.render`: the self-contained HTML pages (jinja2) and the machine-readable JSON.
"""
