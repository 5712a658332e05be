"""The bottom layer: the rule catalogue, the schema tables, limits, and the checks every reader shares.

- ``rules``: the rule catalogue (``schema/rules.json``), each rule a ``Rule`` constant (``rules.HEADER_N_KV``);
- ``tables`` and ``table_records``: the tables of ``schema/`` as typed records, loaded once;
- ``limits``: named resource limits; ``untrusted``: JSON and numbers from hostile text; ``shapes``: element
  counts that cannot overflow; ``naming``: the GGUF file naming convention; ``progress``: an optional tqdm bar.

Imports: the standard library, numpy, ``gguf_construct.errors`` and this package only.
"""
