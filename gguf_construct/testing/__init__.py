"""Tools to test readers: ``strategies`` (hypothesis strategies drawing valid and broken files) and
``fuzzing`` (differential fuzzing against other readers). Both need the ``fuzz`` extra.

Imports: anything in the library, nothing from ``cli``.
"""
