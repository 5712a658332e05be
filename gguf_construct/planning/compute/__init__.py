"""llama.cpp's CPU compute buffer predicted from a model's shape: the graphs it reserves, built as a small IR
(:mod:`.graph`) and allocated as ggml-alloc allocates them (:mod:`.alloc`)."""
