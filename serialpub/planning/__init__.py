"""``serialpub plan``: the settings of a series tried in memory before its first release.

:mod:`~serialpub.planning.grid` reads the candidate settings and refuses impossible ones,
:mod:`~serialpub.planning.series` publishes each candidate's series in memory with the
anonymizer the draft path runs and measures it, :mod:`~serialpub.planning.page` writes the
HTML page with the frontier plot and the advice drawn from the figures
(docs/choosing.md, "Planning with serialpub plan").
"""
