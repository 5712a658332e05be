"""The ``gguf-construct`` command line."""
