"""The safetensors format (HF safetensors, MLX, Ollama's tensor blobs): ``schema``, its ``dtypes``, and
how three ``writers`` lay a file out.

Imports: ``errors``, ``core`` and the shared ``formats`` modules.
"""
