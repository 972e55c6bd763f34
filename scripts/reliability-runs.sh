#!/usr/bin/env bash
# The runs behind the tables of docs/RELIABILITY.md: for each fault kind
# alone and for all of them mixed, RUNS runs of DURATION_S seconds (seeds
# 1..RUNS), each writing its report to OUT/<faults>-<seed>.json; then
# scripts/reliability-table.py OUT prints the table.
# Usage: scripts/reliability-runs.sh [OUT] [RUNS] [DURATION_S]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-reliability-out}"
runs="${2:-3}"
duration="${3:-60}"
mkdir -p "$out"
# The planted-bugs feature: the negative control below needs
# --planted-bug; the fault runs are the same code either way.
cargo build --release -p ataman --features ataman-node/planted-bugs
bin=target/release/ataman
for faults in kill pause partition oneway delay wipe diskfull clock crash \
  kill,pause,partition,oneway,delay,wipe,diskfull,clock,crash; do
  for (( seed = 1; seed <= runs; seed++ )); do
    name="${faults//,/+}"
    [[ "$faults" == *,* ]] && name=all
    echo "$(date +%T) $faults seed $seed (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    "$bin" test-cluster --seed "$seed" --duration-s "$duration" --faults "$faults" \
      --report "$out/$name-$seed.json" > "$out/$name-$seed.txt" 2>&1 || true
    grep -E '^(PASS|FAIL)' "$out/$name-$seed.txt" || tail -3 "$out/$name-$seed.txt"
  done
done
# The negative control: the planted bug caught (and the same runs without it).
for (( seed = 1; seed <= runs; seed++ )); do
  for bug in yes no; do
    args=(--seed "$seed" --duration-s 8 --faults kill --workloads set --from 1
          --replication-factor 1 --anti-entropy-interval-ms 0 --clients 6 --rate 0
          --sync-delay-ms 20)
    [[ $bug == yes ]] && args+=(--planted-bug ack-before-wal)
    echo "$(date +%T) negative control seed $seed planted bug $bug (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    "$bin" test-cluster "${args[@]}" --report "$out/planted-$bug-$seed.json" \
      -- --memtable-bytes-max 1048576 > "$out/planted-$bug-$seed.txt" 2>&1 || true
    grep -E '^(PASS|FAIL)' "$out/planted-$bug-$seed.txt" || tail -3 "$out/planted-$bug-$seed.txt"
  done
done
python3 scripts/reliability-table.py "$out"
