"""The memory llama.cpp allocates for a model, planned from its GGUF header."""
