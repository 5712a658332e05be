"""The construct declarations of every file format (GGUF, GGML/GGMF/GGJT, rwkv.cpp, safetensors, Ollama, imatrix),
with the shared fields, the zero-copy stream and tensor data they are built from."""
