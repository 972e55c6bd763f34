#!/usr/bin/env bash
# Runs the figures of docs/bench-log/2026-11-21-engine-01-04-baseline.md, each config 3 times, JSON into $OUT.
# Usage: scripts/bench-engine-runs.sh [OUT_DIR]   (after cargo build --release)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-out}
B=target/release/ataman
mkdir -p "$OUT"
for run in 1 2 3; do
  for w in 1 100 1000; do
    # One writer with an fsync per put does ~4k ops/s here: 20k puts keep the run short.
    ops=200000; [ "$w" = 1 ] && ops=20000
    $B bench engine --ops $ops --writers $w --batch 1 --durability complete --wal-mode fsync \
      --json "$OUT/engine-w$w-complete-$run.json" > /dev/null
    $B bench engine --ops 200000 --writers $w --batch 1 --durability none --wal-mode fsync \
      --json "$OUT/engine-w$w-none-$run.json" > /dev/null
  done
  $B bench engine --ops 200000 --writers 100 --batch 1 --durability none --wal-mode fsync \
    --readrandom --reads 200000 --json "$OUT/engine-readrandom-$run.json" > /dev/null
  $B bench recovery --rows 1000000 --json "$OUT/recovery-1m-$run.json" > /dev/null
  $B bench fjall --ops 200000 --per-put-ops 5000 --json "$OUT/fjall-$run.json" > /dev/null
done
echo "runs in $OUT"
