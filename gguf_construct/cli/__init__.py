"""The ``gguf-construct`` command line: one module per command, ``main`` to dispatch, ``shared`` for what
they share, ``report`` for what ``info`` shows, ``scan_runner`` for ``scan`` over many sources.

Imports: anything. Nothing outside this package imports it, but ``testing.fuzzing`` may import ``report``.
"""
