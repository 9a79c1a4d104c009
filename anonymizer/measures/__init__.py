"""Privacy and utility measures of a release, for the report (issue 7).

Pure computation like the rest of :mod:`anonymizer`: arrays in, numbers out, no I/O.
Each module covers one family and cites its source paper (``shared/papers``):

- :mod:`.diversity`: k-anonymity, ℓ-diversity (distinct, entropy, recursive), t-closeness,
  the thesis's categorical diversity and density controls (paper 000).
- :mod:`.personalized`: Xiao & Tao's personalized breach probability (paper 001).
- :mod:`.disclosure`: Malik's disclosure risk after probabilistic attacks, Ψ and 𝓗 (paper 002).
- :mod:`.channel`: Askari et al.'s information-theoretic privacy and utility (paper 003).
- :mod:`.utility`: information-loss measures (discernibility, NCP, entropy measures, ...).

Every module returns :class:`Measure` records from its ``summary`` function so that the
report lists them uniformly, including the ones that were not computed and why.
"""

from anonymizer.measures.base import Measure, not_computed

__all__ = ["Measure", "not_computed"]
