module github.com/gguf-construct/benchmarks/peers/gguf_parser_breakdown

go 1.22.0

require github.com/gpustack/gguf-parser-go v0.25.0
