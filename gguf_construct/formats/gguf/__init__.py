"""GGUF v1, v2 and v3: the declaration (``schema.GGUF``), field offsets, the spec-readable reference
declaration, string-array scans, and llama.cpp's legacy ``imatrix.dat`` (read and written beside GGUF imatrices).

Imports: ``errors``, ``core`` and the shared ``formats`` modules.
"""
