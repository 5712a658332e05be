"""rwkv.cpp's model format (versions 100 and 101), declared in ``schema``.

Imports: ``errors``, ``core`` and the shared ``formats`` modules (``formats.legacy`` for its fields).
"""
