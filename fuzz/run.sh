#!/usr/bin/env bash
# Run every atheris harness for SECONDS each and report executions and crashes.
#
#   fuzz/run.sh SECONDS [HARNESS...]        (default: parse load validate dequant dispatch)
#
# Environment: PYTHON (default: python3), FUZZ_WORK (seeds, corpora, crashes, logs; default
# ${TMPDIR:-/tmp}/gguf-construct-fuzz), FUZZ_JOBS (harnesses run at once; default 1), FUZZ_RSS_MB (default 2048),
# FUZZ_TIMEOUT (per-input seconds for libFuzzer; default 1), FUZZ_MAX_LEN (default 65536).
# Installs atheris (pip) when it is missing. Crashes land in $FUZZ_WORK/crashes/<harness>-crash-*;
# the summary (harness, executions, exec/s, crashes) is printed and written to $FUZZ_WORK/summary.tsv.
# FUZZ_IGNORE=Type@path-fragment,... lets a run go on past bugs already reported (see fuzz/common.py).
set -euo pipefail

SECONDS_EACH=${1:?usage: fuzz/run.sh SECONDS [HARNESS...]}
shift || true
HARNESSES=("${@:-parse load validate dequant dispatch}")
# shellcheck disable=SC2206
HARNESSES=(${HARNESSES[@]})
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
PYTHON=${PYTHON:-python3}
WORK=${FUZZ_WORK:-${TMPDIR:-/tmp}/gguf-construct-fuzz}
JOBS=${FUZZ_JOBS:-1}
RSS_MB=${FUZZ_RSS_MB:-2048}
TIMEOUT=${FUZZ_TIMEOUT:-1}
MAX_LEN=${FUZZ_MAX_LEN:-65536}

if ! "$PYTHON" -c "import atheris" 2>/dev/null; then
    echo "installing atheris ..."
    "$PYTHON" -m pip install --quiet atheris
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$WORK/crashes" "$WORK/logs"
"$PYTHON" "$HERE/make_seeds.py" "$WORK/seeds" --max-len "$MAX_LEN"

# A harness stops at its first crash; it is restarted on its grown corpus until its time is used up.
run_one() {
    local name=$1 start left
    mkdir -p "$WORK/corpus/$name"
    : >"$WORK/logs/$name.log"
    start=$(date +%s)
    while left=$((SECONDS_EACH - ($(date +%s) - start))); [ "$left" -gt 2 ]; do
        "$PYTHON" "$HERE/fuzz_$name.py" "$WORK/corpus/$name" "$WORK/seeds/$name" \
            -max_total_time="$left" -timeout="$TIMEOUT" -rss_limit_mb="$RSS_MB" -max_len="$MAX_LEN" \
            -print_final_stats=1 -artifact_prefix="$WORK/crashes/$name-" >>"$WORK/logs/$name.log" 2>&1 || true
    done
}

running=0
for name in "${HARNESSES[@]}"; do
    run_one "$name" &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then
        wait -n
        running=$((running - 1))
    fi
done
wait

printf 'harness\texecutions\texec_per_s\tcrashes\n' >"$WORK/summary.tsv"
total=0
for name in "${HARNESSES[@]}"; do
    log="$WORK/logs/$name.log"
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | awk '{s += $1} END {print s + 0}')
    execs=${execs:-0}
    rate=$((execs / SECONDS_EACH))
    crashes=$(find "$WORK/crashes" -name "$name-crash-*" -o -name "$name-timeout-*" -o -name "$name-oom-*" | wc -l)
    printf '%s\t%s\t%s\t%s\n' "$name" "$execs" "$rate" "$crashes" >>"$WORK/summary.tsv"
    total=$((total + execs))
done
printf 'total\t%s\t\t%s\n' "$total" "$(find "$WORK/crashes" -type f ! -name '*known-*' | wc -l)" >>"$WORK/summary.tsv"
column -t -s $'\t' "$WORK/summary.tsv"
