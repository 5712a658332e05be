"""The file formats as construct declarations: one subpackage per format family.

- ``gguf``: GGUF v1-v3 (``schema``), where each field lies (``offsets``), the spec-readable declaration
  (``reference``), string-array scans, llama.cpp's ``imatrix.dat``;
- ``legacy``: the formats before GGUF (GGML, GGMF, GGJT): ``schema``, ``magic`` (detection), ``hparams``;
- ``rwkv``: rwkv.cpp's format; ``safetensors``: the safetensors format, its dtypes and three writers' layouts;
  ``ollama``: Ollama's model manifests;
- ``base``, ``fields``, ``streaming``: what every declaration shares (zero-copy streams, hostile-safe fields,
  tensor bytes that stay in their file).

Imports: ``errors``, ``core`` and ``quants.blocks`` (block sizes) only; never validation, sources, api or above.
"""
