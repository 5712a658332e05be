/* A libFuzzer / AFL++ harness for ggml's GGUF reader (gguf_init_from_file), as a program that loads a model
 * would use it: parse the file, load its tensor data (no_alloc = false) and use every tensor as ggml's ops do:
 * its first and last byte (ggml_nbytes), the block holding its last element (addressed through ne[] and nb[]),
 * its first and last row converted to floats with the type's own to_float (at most HARNESS_ROW_ELEMENTS
 * elements of each, so a huge row costs bounded work), and, for a tensor of at most HARNESS_ROW_ELEMENTS
 * elements, the whole tensor as one run of elements (a copy of ggml_nbytes, to_float over ggml_nelements). Then
 * it computes the metadata's size as a program that writes the file back does (gguf_get_meta_size).
 *
 * The reader allocates its whole data section in one piece. To keep a fuzzing run inside its memory, the harness
 * first parses the metadata only and skips a file whose data section, summed as the reader sums it (padded sizes
 * added in size_t), exceeds HARNESS_MAX_DATA bytes; everything else goes through the full load.
 *
 * Build: fuzz/native/build.sh LLAMA_OR_GGML_CHECKOUT (compiles this file against that checkout's ggml sources).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ggml.h"
#include "gguf.h"

#ifndef HARNESS_MAX_DATA
#define HARNESS_MAX_DATA (64u << 20)
#endif

#ifndef HARNESS_ROW_ELEMENTS
#define HARNESS_ROW_ELEMENTS 4096
#endif

static void quiet_log(enum ggml_log_level level, const char *text, void *user) {
    (void) level; (void) text; (void) user;
}

static size_t pad(size_t x, size_t n) { return (x + n - 1) & ~(n - 1); }

/* Whether the data section the reader will allocate, computed with the reader's own (wrapping) arithmetic, is at
 * most HARNESS_MAX_DATA: 1 yes, 0 no, -1 when the reader refuses the file's metadata already. */
static int data_section_fits(const char *path) {
    struct gguf_init_params meta = { /*no_alloc =*/ true, /*ctx =*/ NULL };
    struct gguf_context *g = gguf_init_from_file(path, meta);
    if (!g) return -1;
    size_t total = 0, align = gguf_get_alignment(g);
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) total += pad(gguf_get_tensor_size(g, i), align);
    gguf_free(g);
    return total <= HARNESS_MAX_DATA;
}

static volatile uint8_t sink;
static char input_path[64];
static float row_floats[HARNESS_ROW_ELEMENTS * 2]; /* room for the bytes of as many 8-byte elements */

/* ``count`` blocks of a row from block ``first`` on, as floats: the type's to_float, or a copy of the bytes for a
 * type without one (f32, integers). */
static void convert_blocks(const struct ggml_tensor *t, const uint8_t *row, int64_t first, int64_t count) {
    const int64_t k = count * ggml_blck_size(t->type);
    const size_t ts = ggml_type_size(t->type);
    const struct ggml_type_traits *traits = ggml_get_type_traits(t->type);
    if (traits->to_float) {
        traits->to_float(row + (size_t) first * ts, row_floats, k);
    } else {
        memcpy(row_floats, row + (size_t) first * ts, (size_t) count * ts);
    }
    sink ^= ((const uint8_t *) row_floats)[0];
}

/* A small tensor as one run of elements, as llama-quantize dequantizes a tensor: its ggml_nbytes copied into a
 * buffer of that size (as a program reading it from the file holds it), then to_float over ggml_nelements. */
static void whole_tensor(const struct ggml_tensor *t, const uint8_t *bytes, size_t n) {
    const int64_t ne = ggml_nelements(t);
    const struct ggml_type_traits *traits = ggml_get_type_traits(t->type);
    if (!traits->to_float || !n || ne <= 0 || ne > HARNESS_ROW_ELEMENTS) return;
    uint8_t *copy = malloc(n);
    if (!copy) return;
    memcpy(copy, bytes, n);
    traits->to_float(copy, row_floats, ne);
    sink ^= ((const uint8_t *) row_floats)[0];
    free(copy);
}

/* Use a tensor as ggml's ops do: the bytes ggml_nbytes spans, the block of its last element at
 * data + sum((ne[i]-1)*nb[i]) (element ne[0]-1 of a row sits in block (ne[0]-1)/block size), the first blocks of
 * its first row and the last blocks of its last row through to_float (HARNESS_ROW_ELEMENTS elements at most). A
 * tensor without elements is not touched. */
static void use_tensor(const struct ggml_tensor *t) {
    const uint8_t *bytes = (const uint8_t *) t->data;
    const int64_t blck = ggml_blck_size(t->type);
    if (!bytes || blck <= 0) return;
    for (int i = 0; i < GGML_MAX_DIMS; ++i) {
        if (t->ne[i] <= 0) return;
    }
    size_t n = ggml_nbytes(t);
    if (n) sink ^= bytes[0] ^ bytes[n - 1];
    const int64_t blocks = (t->ne[0] - 1) / blck + 1;  /* the blocks a row's elements sit in */
    size_t last_row = 0;
    for (int i = 1; i < GGML_MAX_DIMS; ++i) last_row += (size_t) (t->ne[i] - 1) * t->nb[i];
    const uint8_t *last = bytes + last_row + (size_t) (blocks - 1) * t->nb[0];
    sink ^= last[0] ^ last[ggml_type_size(t->type) - 1];
    const int64_t most = HARNESS_ROW_ELEMENTS / blck, count = blocks < most ? blocks : most;
    convert_blocks(t, bytes, 0, count);
    convert_blocks(t, bytes + last_row, blocks - count, count);
    whole_tensor(t, bytes, n);
}

/* Load one file; 1 when the reader accepted it, 0 when it refused it, -1 when its data section is too big to try. */
static int load(const char *path) {
    int fits = data_section_fits(path);
    if (fits <= 0) return fits < 0 ? 0 : -1;
    struct ggml_context *tensors = NULL;
    struct gguf_init_params params = { /*no_alloc =*/ false, /*ctx =*/ &tensors };
    struct gguf_context *g = gguf_init_from_file(path, params);
    if (!g) return 0;
    for (int64_t i = 0; i < gguf_get_n_kv(g); ++i) {
        if (gguf_get_kv_type(g, i) == GGUF_TYPE_STRING) sink ^= (uint8_t) strlen(gguf_get_val_str(g, i));
    }
    for (struct ggml_tensor *t = ggml_get_first_tensor(tensors); t; t = ggml_get_next_tensor(tensors, t)) {
        if (t->data) use_tensor(t);
    }
    sink ^= (uint8_t) gguf_get_meta_size(g); /* the metadata written back, as gguf-split and the model saver do */
    ggml_free(tensors);
    gguf_free(g);
    return 1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void) argc; (void) argv;
    if (!getenv("GGUF_HARNESS_LOG")) ggml_log_set(quiet_log, NULL); /* set it to see the reader's messages */
    snprintf(input_path, sizeof input_path, "/dev/shm/gguf-harness-%d", (int) getpid());
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FILE *f = fopen(input_path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    load(input_path);
    return 0;
}

#ifdef HARNESS_STANDALONE
/* Without libFuzzer: load each file named on the command line; with none, read one path per line on stdin and
 * answer "ok" after each (a crash ends the process: the caller sees it die on that path). `--json FILE` answers as
 * a one-shot reader of `gguf-construct fuzz --against 'gguf_load --json {}'`: {"ok": true, "view": {}} when the
 * reader accepts the file, {"ok": false, "error": ...} when it refuses it (exit status 0 either way). */
int main(int argc, char **argv) {
    LLVMFuzzerInitialize(&argc, &argv);
    if (argc == 3 && strcmp(argv[1], "--json") == 0) {
        int loaded = load(argv[2]);
        if (loaded > 0) printf("{\"ok\": true, \"view\": {}}\n");
        else printf("{\"ok\": false, \"error\": \"%s\"}\n", loaded == 0 ? "gguf_init_from_file returned NULL" : "data section past HARNESS_MAX_DATA: not loaded");
        return 0;
    }
    for (int i = 1; i < argc; ++i) load(argv[i]);
    if (argc > 1) return 0;
    char line[4096];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = 0;
        load(line);
        printf("ok\n");
        fflush(stdout);
    }
    return 0;
}
#endif
