"""serialpub: serial publishing of microdata under the global guarantee.

The application layer: configuration, pipeline steps, the ``serialpub`` command line and
reports. It builds on ``anonymizer`` (computation), ``state`` (persistence) and ``checks``
(validation); DAG files in ``dags/`` only wire its steps.
"""

__version__ = "0.1.0"

from serialpub.heap import share_one_arena

share_one_arena()
