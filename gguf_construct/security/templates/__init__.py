"""The chat template scanner's parts (the public entry points are in ``gguf_construct.security.chat_templates``):

* ``table``: the known-safe subset (one table of statements, filters, tests, methods, globals and attribute names);
* ``allowlist``: every operation of a template checked against that subset, in one linear walk;
* ``abstract``, ``syntax``, ``flow`` (with its mixins): the data-flow analysis that proves computed keys safe and bounds render cost;
* ``render``: the dynamic check, a bounded render in Jinja2's sandbox in a child process.
"""
