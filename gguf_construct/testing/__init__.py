"""Tools to test readers: ``strategies`` (hypothesis strategies drawing valid and broken files) and
``fuzzing`` (differential fuzzing against other readers). Both need the ``fuzz`` extra.

Imports: anything in the library; from ``cli`` only ``cli.report`` (fuzzing compares ``info --json`` views).
"""
