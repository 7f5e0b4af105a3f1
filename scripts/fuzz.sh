#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/fuzz_targets/ for N seconds each (default 60).
#   scripts/fuzz.sh [seconds-per-target] [target ...]
# Targets are discovered from the file names, so new ones need no change here. New corpus
# entries go to fuzz/target/corpus/<target> (ignored by git), seeded from the committed
# fuzz/corpus/<target>; crashes land in fuzz/artifacts/<target>/ and make the script fail.
# Needs the nightly toolchain and cargo-fuzz (installed on demand).
set -euo pipefail

secs="${1:-60}"
shift || true
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root/fuzz"

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz
fi

if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    targets=()
    for f in fuzz_targets/*.rs; do
        targets+=("$(basename "$f" .rs)")
    done
fi

# One process per target unless told otherwise (the machine is shared); FUZZ_JOBS=N runs N.
jobs="${FUZZ_JOBS:-1}"
par=()
if [ "$jobs" -gt 1 ]; then
    par=(-jobs="$jobs" -workers="$jobs")
fi
status=0
for t in "${targets[@]}"; do
    work="target/corpus/$t"
    mkdir -p "$work" "corpus/$t"
    echo "== fuzzing $t for ${secs}s (jobs=$jobs)"
    start=$(date +%s)
    if cargo +nightly fuzz run -O "$t" "$work" "corpus/$t" -- \
        -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
        "${par[@]}" -print_final_stats=1; then
        echo "== $t: OK after $(( $(date +%s) - start ))s, corpus $(ls "$work" | wc -l) files"
    else
        echo "== $t: FAILED (see fuzz/artifacts/$t/)"
        status=1
    fi
done
exit "$status"
