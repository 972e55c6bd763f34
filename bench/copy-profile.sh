#!/bin/bash
# Where a transition copy's time goes (issue 16; docs/bench-log/
# 2026-11-26-layout-copy-profile.md): a local 3-node cluster (R = 3)
# filled with N keys of 1 KiB (default 200000), then a fourth node added
# (`ataman cluster add`), optionally under a constant-rate mixed:50 load
# of LOAD_RATE req/s (default 0: none) for LOAD_SEC (120) seconds, the
# add 15 s in (the move must end within the load). Prints the time from the add to
# settled, the bytes the new node copied and the copy rate against the
# limit, every node's CPU seconds (and the busiest threads') during the
# move, the load's p99 before and during the move, and the copy's log
# lines (`one-pass copy…`: each source's pages, page waits, fetches and
# apply time; `transition copy…`: the sources' side, and any comparing
# session's phases).
# Usage: bench/copy-profile.sh [N], from the repository root after
# `cargo build --release -p ataman --bin ataman`. Loopback ports
# BASE_PORT (19801) .. +3 and +1000 .. +1003. RATE_BYTES sets the copy
# limit (default 67108864).
set -eu
B=${ATAMAN:-target/release/ataman}
N=${1:-200000}
LIMIT=${RATE_BYTES:-67108864}
BASE=${BASE_PORT:-19801}
LOAD_RATE=${LOAD_RATE:-0}
R=${BENCH_DIR:-/tmp/ataman-copy-profile}; rm -rf "$R"; mkdir -p "$R"
U="http://127.0.0.1:$BASE,http://127.0.0.1:$((BASE + 1)),http://127.0.0.1:$((BASE + 2))"
now() { date +%s.%N; }
$B cluster start --nodes 3 --base-port "$BASE" --dir "$R/c" -- \
  --anti-entropy-interval-ms 0 --anti-entropy-rate-bytes "$LIMIT" > "$R/start.out" 2> "$R/start.err" &
SUP=$!
LOAD=
trap 'kill $LOAD $SUP 2>/dev/null || true; wait 2>/dev/null || true' EXIT
for _ in $(seq 300); do [ "$(wc -l < "$R/start.out")" -ge 3 ] && break; sleep 0.1; done
[ "$(wc -l < "$R/start.out")" -ge 3 ] || { echo "the cluster did not start"; cat "$R/start.err"; exit 1; }
echo "== machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); limit $LIMIT B/s; load $LOAD_RATE req/s"
t=$(now)
$B bench http --url "$U" --workload get-existing --fill "$N" --value-size 1024 --ack 2 --from 3 \
  --rate 10 --duration 1s --connections 48 --no-spectrum > "$R/fill.txt" 2>&1
echo "== filled $N keys of 1 KiB in $(python3 -c "print(round($(now) - $t))") s"
# Per-thread CPU ticks of every node (children of the supervisor), by pid/tid.
ticks() {
  for p in $(pgrep -P "$SUP"); do
    for t in /proc/"$p"/task/*; do
      [ -r "$t/stat" ] && echo "$p $(basename "$t") $(cat "$t/comm" 2>/dev/null | tr ' ' _) $(awk '{print $14 + $15}' "$t/stat" 2>/dev/null)"
    done
  done
}
if [ "$LOAD_RATE" -gt 0 ]; then
  $B bench http --url "$U" --workload mixed:50 --keys "$N" --value-size 1024 --rate "$LOAD_RATE" \
    --duration "${LOAD_SEC:-120}s" --connections "${LOAD_CONNECTIONS:-32}" --json "$R/load.json" --no-spectrum > "$R/load.txt" 2>&1 &
  LOAD=$!
  sleep 15
fi
T0=$(now)
ticks > "$R/ticks.before"
$B cluster add --dir "$R/c" > "$R/add.txt" 2>&1 || { echo "add failed"; cat "$R/add.txt"; }
TSET=$(now)
ticks > "$R/ticks.after"
curl -s "http://127.0.0.1:$((BASE + 3))/metrics" > "$R/new-node.metrics"
for p in 0 1 2 3; do
  echo "== node $p: $(curl -s "http://127.0.0.1:$((BASE + p))/metrics" | grep -E '^ataman_engine_(write_stall|compaction_bytes|flush)[a-z_]* ' | tr '\n' ' ')"
done > "$R/engine.txt"
if [ -n "$LOAD" ]; then wait "$LOAD" || true; LOAD=; fi
python3 - "$R" "$T0" "$TSET" "$LIMIT" <<'PY'
import json, os, statistics, sys
r, t0, tset, limit = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
m = dict(l.rsplit(" ", 1) for l in open(f"{r}/new-node.metrics").read().splitlines()
         if l.startswith("ataman_layout_copy_") and " " in l and "{" not in l)
moved = int(float(m.get("ataman_layout_copy_bytes_moved_total", "0")))
took = tset - t0
print(f"== add to settled {took:.1f} s; copied {moved} bytes: {moved / took / 1048576:.1f} MiB/s = "
      f"{moved / took / limit * 100:.0f}% of the limit")
def load(name):
    out = {}
    for l in open(f"{r}/{name}"):
        f = l.split()
        if len(f) == 4 and f[3].isdigit():  # a thread that ended meanwhile has no figure
            out[(f[0], f[1])] = (f[2], int(f[3]))
    return out
a, b = load("ticks.before"), load("ticks.after")
per_pid, threads = {}, []
for k, (comm, t1) in b.items():
    d = t1 - a.get(k, (comm, 0))[1]
    per_pid[k[0]] = per_pid.get(k[0], 0) + d
    threads.append((d, k[0], comm))
print("== CPU s during the move per node (pid): " + ", ".join(f"{p}: {d / 100:.1f}" for p, d in sorted(per_pid.items())))
for d, p, comm in sorted(threads, reverse=True)[:8]:
    print(f"==   {p} {comm:16} {d / 100:6.1f} s")
if os.path.exists(f"{r}/load.json"):
    j = json.load(open(f"{r}/load.json"))
    s = j["series"]
    add_s = 15
    for name, lo, hi in (("before", 2, add_s), ("during", add_s, add_s + int(took) + 1)):
        x = [e for e in s if lo <= e["second"] < hi]
        if x:
            print(f"== load {name:6} {len(x):3} s: {sum(e['requests'] for e in x) / len(x):7.0f} req/s, "
                  f"p99 per second median {statistics.median(e['p99_ms'] for e in x):8.2f} ms")
    print("== p99 ms per second from the add: " + " ".join(f"{e['p99_ms']:.0f}" for e in s if e["second"] >= add_s))
PY
grep -h "transition copy\|one-pass copy" "$R/start.err" | sed 's/^/   /' | cut -c1-400
cat "$R/engine.txt"
