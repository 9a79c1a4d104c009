"""Pure computation of serialpub: privacy mathematics, hierarchies and anonymization.

Lowest layer (docs/design.md section 7): no I/O, and nothing here imports ``state``,
``checks``, ``serialpub`` or ``dags``.
"""
