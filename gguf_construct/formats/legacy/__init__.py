"""The llama.cpp-family formats before GGUF: unversioned GGML, GGMF v1, GGJT v1-v3.

``schema`` declares them, ``magic`` tells them apart by their first bytes (rwkv.cpp's too), ``hparams`` holds the
hyper-parameter profiles (llama, the ggml examples, whisper.cpp), ``legacy_fields`` their vocabularies and records.

Imports: ``errors``, ``core`` and the shared ``formats`` modules.
"""
