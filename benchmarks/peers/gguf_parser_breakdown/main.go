// Command gguf-parser-breakdown prints gguf-parser-go's llama.cpp memory estimate for one GGUF file as JSON,
// per device and per component (weights, KV cache, computation), where gguf-parser's own --json prints only
// each device's total. It calls the function behind gguf-parser's estimate, EstimateLLaMACppRun, with the
// options its flags (named as gguf-parser names them) give, and adds nothing of its own.
//
//	gguf-parser-breakdown --path FILE [--ctx-size N] [--batch-size N] [--ubatch-size N] [--parallel-size N]
//	    [--flash-attention] [--cache-type-k T] [--cache-type-v T] [--gpu-layers N] [--swa-full]
//	    [--mmap | --no-mmap] [--platform-footprint RAM,VRAM] [--json] [--estimate]
//
// Every flag is gguf-parser's too, so that one command line asks either binary: the totals ("summary")
// are those gguf-parser's --json prints with the same flags; the output is always JSON.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	parser "github.com/gpustack/gguf-parser-go"
)

var cacheTypes = map[string]parser.GGMLType{
	"f32": parser.GGMLTypeF32, "f16": parser.GGMLTypeF16, "bf16": parser.GGMLTypeBF16, "q8_0": parser.GGMLTypeQ8_0,
	"q4_0": parser.GGMLTypeQ4_0, "q4_1": parser.GGMLTypeQ4_1, "iq4_nl": parser.GGMLTypeIQ4_NL,
	"q5_0": parser.GGMLTypeQ5_0, "q5_1": parser.GGMLTypeQ5_1,
}

func main() {
	path := flag.String("path", "", "the GGUF file")
	ctxSize := flag.Int("ctx-size", 0, "context size (0: the model's)")
	batch := flag.Int("batch-size", 2048, "logical batch size")
	ubatch := flag.Int("ubatch-size", 512, "physical batch size")
	parallel := flag.Int("parallel-size", 1, "parallel sequences")
	flashAttention := flag.Bool("flash-attention", false, "flash attention on")
	typeK := flag.String("cache-type-k", "f16", "K cache type")
	typeV := flag.String("cache-type-v", "f16", "V cache type")
	gpuLayers := flag.Int("gpu-layers", -1, "layers to offload (-1: all)")
	swaFull := flag.Bool("swa-full", false, "full-size sliding-window cache")
	mmap := flag.Bool("mmap", false, "totals with the weights mapped")
	flag.Bool("no-mmap", false, "totals with the weights loaded (the default)")
	footprint := flag.String("platform-footprint", "150,250", "the RAM,VRAM the platform takes, in MiB")
	flag.Bool("json", true, "JSON output (always)")
	flag.Bool("estimate", true, "the estimate only (always)")
	flag.Parse()
	ram, vram, err := footprints(*footprint)
	if err == nil {
		err = run(*path, *ctxSize, *batch, *ubatch, *parallel, *flashAttention, *typeK, *typeV, *gpuLayers, *swaFull, *mmap, ram, vram)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gguf-parser-breakdown:", err)
		os.Exit(2)
	}
}

// footprints reads "RAM,VRAM" in MiB as bytes.
func footprints(s string) (uint64, uint64, error) {
	parts := strings.Split(s, ",")
	if len(parts) != 2 {
		return 0, 0, fmt.Errorf("--platform-footprint %q is not RAM,VRAM", s)
	}
	var out [2]uint64
	for i, p := range parts {
		v, err := strconv.ParseUint(strings.TrimSpace(p), 10, 32)
		if err != nil {
			return 0, 0, fmt.Errorf("--platform-footprint %q: %w", s, err)
		}
		out[i] = v << 20
	}
	return out[0], out[1], nil
}

func run(path string, ctxSize, batch, ubatch, parallel int, flashAttention bool, typeK, typeV string, gpuLayers int, swaFull, mmap bool,
	ram, vram uint64) error {
	if path == "" {
		return fmt.Errorf("--path is required")
	}
	if batch < 1 || ubatch < 1 || ubatch > batch || parallel < 1 || ctxSize < 0 || ctxSize > 1<<30 || batch > 1<<30 {
		return fmt.Errorf("sizes out of range: ctx %d, batch %d, ubatch %d, parallel %d", ctxSize, batch, ubatch, parallel)
	}
	k, okK := cacheTypes[typeK]
	v, okV := cacheTypes[typeV]
	if !okK || !okV {
		return fmt.Errorf("unknown cache type %q or %q", typeK, typeV)
	}
	gf, err := parser.ParseGGUFFile(path, parser.SkipLargeMetadata(), parser.UseMMap())
	if err != nil {
		return err
	}
	opts := []parser.GGUFRunEstimateOption{
		parser.WithParallelSize(int32(parallel)),
		parser.WithLLaMACppLogicalBatchSize(int32(batch)),
		parser.WithLLaMACppPhysicalBatchSize(int32(ubatch)),
		parser.WithLLaMACppCacheKeyType(k),
		parser.WithLLaMACppCacheValueType(v),
	}
	if ctxSize > 0 {
		opts = append(opts, parser.WithLLaMACppContextSize(int32(ctxSize)))
	}
	if flashAttention {
		opts = append(opts, parser.WithFlashAttention())
	}
	if gpuLayers >= 0 {
		opts = append(opts, parser.WithLLaMACppOffloadLayers(uint64(gpuLayers)))
	}
	if swaFull {
		opts = append(opts, parser.WithLLaMACppFullSizeSWACache())
	}
	estimate := gf.EstimateLLaMACppRun(opts...)
	out := map[string]any{
		"estimate": estimate,
		// The totals gguf-parser's --json prints for the same options.
		"summary": estimate.Summarize(mmap, ram, vram),
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	return enc.Encode(out)
}
