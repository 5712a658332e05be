#!/usr/bin/env bash
# Build the GGUF harness (gguf_harness.c) against ggml's reader with ASan+UBSan, in three flavours:
#   OUT/gguf_libfuzzer   libFuzzer (clang -fsanitize=fuzzer)
#   OUT/gguf_load        a plain program: `gguf_load FILE...` loads each file; with no argument it reads one path
#                        per line on stdin and answers "ok" per file (a persistent target for scripts)
#   OUT/gguf_afl         AFL++ (afl-clang-fast, persistent through libAFLDriver), when afl-clang-fast is installed
#
# usage: fuzz/native/build.sh CHECKOUT [OUT]
#   CHECKOUT: a llama.cpp or ggml source tree (ggml/src/gguf.cpp or src/gguf.cpp), or a git directory followed by
#             :REV (e.g. /path/llama.cpp/.git:26a48ad69^), which is exported to a temporary tree first.
#   OUT:      where the binaries go (default: build/gguf-harness under the current directory).
# HARNESS_EXTRA_FLAGS is added to every compile and link (e.g. -fno-sanitize=enum); HARNESS_FLAVOURS picks flavours.
# Needs clang (Debian: apt-get install clang; afl++ for the AFL++ flavour). Nothing of the checkout is copied
# into this repository.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src_arg="${1:?usage: build.sh CHECKOUT [OUT]}"
out="$(mkdir -p "${2:-build/gguf-harness}" && cd "${2:-build/gguf-harness}" && pwd)"
CC="${CC:-clang}"; CXX="${CXX:-clang++}"

if [[ "$src_arg" == *:* && -d "${src_arg%%:*}" && ! -f "$src_arg" ]]; then  # GITDIR:REV
  tree="$out/src-tree"; rm -rf "$tree"; mkdir -p "$tree"
  git --git-dir="${src_arg%%:*}" archive "${src_arg#*:}" | tar -x -C "$tree"
  src_arg="$tree"
fi
if [[ -f "$src_arg/ggml/src/gguf.cpp" ]]; then ggml="$src_arg/ggml"; elif [[ -f "$src_arg/src/gguf.cpp" ]]; then ggml="$src_arg"; else
  echo "no ggml/src/gguf.cpp or src/gguf.cpp under $src_arg" >&2; exit 2; fi

# ggml's base library (ggml-base in its CMakeLists): the reader and what it links to; no compute backend
sources=()
for f in ggml.c ggml.cpp ggml-alloc.c ggml-backend.cpp ggml-backend-meta.cpp ggml-opt.cpp ggml-threading.cpp ggml-quants.c gguf.cpp; do
  [[ -f "$ggml/src/$f" ]] && sources+=("$ggml/src/$f")
done
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1 ${HARNESS_EXTRA_FLAGS:-}"
inc="-I$ggml/include -I$ggml/src -DNDEBUG -D_GNU_SOURCE -DGGML_VERSION=\"harness\" -DGGML_COMMIT=\"harness\""

build() {  # build FLAVOUR CC CXX EXTRA_COMPILE EXTRA_LINK HARNESS_DEFINES
  local name="$1" cc="$2" cxx="$3" cflags="$4" lflags="$5" hdef="$6" objs=() pids=()
  mkdir -p "$out/obj-$name"
  for s in "${sources[@]}"; do
    local o="$out/obj-$name/$(basename "$s").o"
    if [[ "$s" == *.c ]]; then "$cc" $san $cflags $inc -std=gnu11 -c "$s" -o "$o" & else "$cxx" $san $cflags $inc -std=c++17 -c "$s" -o "$o" & fi
    pids+=($!); objs+=("$o")
  done
  for p in "${pids[@]}"; do wait "$p"; done
  "$cc" $san $cflags $hdef $inc -c "$here/gguf_harness.c" -o "$out/obj-$name/harness.o"
  "$cxx" $san $lflags "${objs[@]}" "$out/obj-$name/harness.o" -o "$out/$name" -lm -lpthread -ldl
  echo "built $out/$name"
}

flavours="${HARNESS_FLAVOURS:-gguf_libfuzzer gguf_load gguf_afl}"  # e.g. HARNESS_FLAVOURS=gguf_load for one
[[ " $flavours " == *" gguf_libfuzzer "* ]] && build gguf_libfuzzer "$CC" "$CXX" "-fsanitize=fuzzer-no-link" "-fsanitize=fuzzer" ""
[[ " $flavours " == *" gguf_load "* ]] && build gguf_load "$CC" "$CXX" "" "" "-DHARNESS_STANDALONE"
if [[ " $flavours " == *" gguf_afl "* ]] && command -v afl-clang-fast >/dev/null; then
  AFL_QUIET=1 build gguf_afl afl-clang-fast afl-clang-fast++ "" "-fsanitize=fuzzer" ""
fi
exit 0
