"""Privacy and utility measures of a release, for the report (docs/reports.md).

Pure computation like the rest of :mod:`anonymizer`: arrays in, numbers out, no I/O. Every
function returns numbers (arrays, floats, or a frozen dataclass of them whose docstring gives
shapes and units); how the report names, explains and cites them is
:mod:`serialpub.report.wording`'s. Each module covers one family and cites its source paper
(docs/design.md, "Sources"):

Privacy of one release:

- :mod:`.qi_groups`: the release's QI-groups as sparse (group, sensitive value, count)
  triplets, shared by the next three (paper 000 §3.4).
- :mod:`.diversity`: k-anonymity and ℓ-diversity (distinct, entropy, recursive) (paper 000 §3.2–3.3).
- :mod:`.closeness`: t-closeness, equal and hierarchical ground distance (paper 000 §3.4; Li et al.).
- :mod:`.categorical`: the thesis's categorical diversity and density controls (paper 000 §3.5).
- :mod:`.personalized`: Xiao & Tao's personalized breach probability (paper 001).
- :mod:`.permanent`: the permanent by Ryser's formula (paper 002 eq 2.1).
- :mod:`.disclosure`: Malik's disclosure risk after probabilistic attacks, Ψ and 𝓗 (paper 002).
- :mod:`.reidentification`: Malik's measures of a generalized release by per-QI-group blocks (paper 002).
- :mod:`.channel`: Askari et al.'s mechanism as a noisy channel, its Bayes risk (paper 003 §4.1).
- :mod:`.entropy_utility`: Askari et al.'s entropy-based table utility (paper 003 §4.2).
- :mod:`.kanonymity_channel`: k-anonymity as a channel and a release's channel figures (paper 003 §5).

The global guarantee over the series (paper 004):

- :mod:`.guarantee`: the spread of breach probabilities and the constant-ratio budget.

Utility (information loss):

- :mod:`.group_size`: discernibility, average QI-group size and C_AVG, suppression rate.
- :mod:`.certainty_penalty`: the normalized certainty penalty NCP.
- :mod:`.information_loss`: the thesis's redaction, tree, entropy and tuple-wise variance measures (paper 000 ch. 4).
- :mod:`.utility`: the conventions they share and every utility figure of a release.
- :mod:`.published`: a release's published nodes held per QI-group, as the measures read them.

The report's record of one figure, :class:`serialpub.report.measure.Measure`, is built
from these numbers by the report, not here.
"""
