"""The ``gguf-construct`` command line: one module per command, ``main`` to dispatch, ``shared`` for what
they share, ``report`` for what ``info`` shows, ``scan_runner`` for ``scan`` over many sources,
``signals`` for how every command ends on Ctrl-C, SIGTERM or SIGHUP. A command
module imports what only its command needs inside the function that runs it: every start-up imports every
command module (``benchmarks/bench_import.py`` measures what that costs).

Imports: anything. Nothing outside this package imports it, but ``testing.fuzzing`` may import ``report``.
"""
