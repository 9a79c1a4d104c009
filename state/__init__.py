"""Persistence of serialpub: the statistics file of every published release (paper 004,
section 7) and the list of releases, through SQLAlchemy. Imports only ``anonymizer``."""
