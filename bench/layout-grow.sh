#!/bin/bash
# Adding a node under load (issue 16; docs/BENCHMARKS.md, "Adding a node
# under load"): a local 3-node cluster (R = 3) filled with N keys of 1 KiB
# (default 1000000; ids 1..N, written ack=2 of from=3), a closed-loop
# ceiling of a 50% read / 50% write mix, then a constant-rate load of that
# mix at half the ceiling for LOAD_SEC (default 240) seconds; 30 s into
# it a fourth node is added (`ataman cluster add --no-wait`). Prints:
# - the plan (`ctl layout plan`: the bytes the new node should get, each
#   key once) and the bytes the new node copied, and their ratio;
# - the time from the commit to every node settled, and the copy rate
#   (bytes copied / that time) against --anti-entropy-rate-bytes; and the
#   rate over the copy's own window (the new node's `copying started` to
#   `copying complete` log lines);
# - the load's achieved rate and per-second p99 (median and worst of the
#   seconds) before the add, during the move, and for 30 s after.
# Usage: bench/layout-grow.sh [N], from the repository root after
# `cargo build --release -p ataman --bin ataman`. Loopback ports
# BASE_PORT (19701) .. +3 and +1000 .. +1003. RATE_BYTES sets the copy limit (default 67108864).
# LOAD_RATE sets the load's rate instead of half the ceiling (to hold it
# equal across runs). ADD_AT (default 30) sets the seconds of load before the add (the
# "before" window is from second 2 to it). NO_ADD=1 is the control run:
# the same cluster and load, nothing added; its "during" window is the
# CONTROL_SEC (default 85) seconds after ADD_AT, so a move's windows can
# be set against the steady state's (its flushes and compactions).
# NODE_ARGS adds `ataman serve` options to every node (the added one
# too), e.g. NODE_ARGS="--compaction-rate-bytes 16777216".
# LOAD_CONNECTIONS (default 32) sets the constant-rate load's connections:
# with 32, each carries ~300 req/s, so a server latency above ~3 ms makes
# the generator itself fall behind (its corrected latency then counts the
# backlog); more connections leave the latency to the server.
set -eu
B=${ATAMAN:-target/release/ataman}
N=${1:-1000000}
LIMIT=${RATE_BYTES:-67108864}
BASE=${BASE_PORT:-19701}
LOAD_SEC=${LOAD_SEC:-240}
CONNS=${LOAD_CONNECTIONS:-32}
R=${BENCH_DIR:-/tmp/ataman-grow-bench}; rm -rf "$R"; mkdir -p "$R"
U="http://127.0.0.1:$BASE,http://127.0.0.1:$((BASE + 1)),http://127.0.0.1:$((BASE + 2))"
NEW="http://127.0.0.1:$((BASE + 3))"
now() { date +%s.%N; }
$B cluster start --nodes 3 --base-port "$BASE" --dir "$R/c" -- \
  --anti-entropy-interval-ms 0 --anti-entropy-rate-bytes "$LIMIT" ${NODE_ARGS:-} > "$R/start.out" 2> "$R/start.err" &
SUP=$!
LOAD=
trap 'kill $LOAD $SUP 2>/dev/null || true; wait 2>/dev/null || true' EXIT
for _ in $(seq 300); do [ "$(wc -l < "$R/start.out")" -ge 3 ] && break; sleep 0.1; done
[ "$(wc -l < "$R/start.out")" -ge 3 ] || { echo "the cluster did not start"; cat "$R/start.err"; exit 1; }
echo "== machine: $(nproc) cores, $(awk '/MemTotal/ {print int($2/1048576)}' /proc/meminfo) GiB, load $(cut -d' ' -f1-3 /proc/loadavg)"
t=$(now)
$B bench http --url "$U" --workload get-existing --fill "$N" --value-size 1024 --ack 2 --from 3 \
  --rate 10 --duration 1s --connections 48 --no-spectrum > "$R/fill.txt" 2>&1
echo "== filled $N keys of 1 KiB in $(python3 -c "print(round($(now) - $t))") s"
$B bench http --url "$U" --workload mixed:50 --keys "$N" --value-size 1024 --rate 0 \
  --duration 10s --connections 32 --json "$R/ceiling.json" --no-spectrum > "$R/ceiling.txt" 2>&1
HALF=${LOAD_RATE:-$(python3 -c "import json; print(int(json.load(open('$R/ceiling.json'))['achieved_rps'] / 2))")}
CEILING=$(python3 -c "import json; print(int(json.load(open('$R/ceiling.json'))['achieved_rps']))")
echo "== ceiling (closed loop, 32 connections): $CEILING req/s; load at $HALF req/s on $CONNS connections"
$B ctl --url "http://127.0.0.1:$BASE" layout plan --add "$NEW" > "$R/plan.txt"
$B bench http --url "$U" --workload mixed:50 --keys "$N" --value-size 1024 --rate "$HALF" \
  --duration "${LOAD_SEC}s" --connections "$CONNS" --json "$R/load.json" --no-spectrum > "$R/load.txt" 2>&1 &
LOAD=$!
T0=$(now)
T0_SECONDS=$SECONDS
sleep "${ADD_AT:-30}"
TADD=$(now)
TSET=
if [ -n "${NO_ADD:-}" ]; then
  sleep "${CONTROL_SEC:-85}"
  TSET=$(now)
  echo "== control run: nothing added; \"during\" is the ${CONTROL_SEC:-85} s after second ${ADD_AT:-30}"
else
  $B cluster add --dir "$R/c" --no-wait > "$R/add.txt"
fi
# Polled with one curl and bash builtins: this loop runs only during the
# move, on the host the nodes share (a python3, four curls and four greps
# every 0.5 s took ~8% of the 2 vCPUs, charged to the move's window).
while [ -z "${NO_ADD:-}" ] && [ $((SECONDS - T0_SECONDS)) -lt $((LOAD_SEC - 30)) ]; do
  out=$(curl -s "http://127.0.0.1:$BASE/v0/layout" "http://127.0.0.1:$((BASE + 1))/v0/layout" \
    "http://127.0.0.1:$((BASE + 2))/v0/layout" "http://127.0.0.1:$((BASE + 3))/v0/layout")
  settled=0
  while [[ $out == *'"settled":true'* ]]; do out=${out#*'"settled":true'}; settled=$((settled + 1)); done
  if [ $settled -eq 4 ]; then TSET=$(now); break; fi
  sleep 0.5
done
curl -s "http://127.0.0.1:$((BASE + 3))/metrics" > "$R/new-node.metrics" || true
wait $LOAD || true
LOAD=
python3 - "$R" "$T0" "$TADD" "${TSET:-0}" "$LIMIT" "${NO_ADD:-}" <<'PY'
import json, statistics, sys
r, t0, tadd, tset, limit = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
control = bool(sys.argv[6])
if not control:
    plan = [l.split("\t") for l in open(f"{r}/plan.txt").read().splitlines()]
    ideal = int(plan[-1][4])
    metrics = dict(
        l.rsplit(" ", 1) for l in open(f"{r}/new-node.metrics").read().splitlines()
        if l.startswith("ataman_layout_copy_") and " " in l and "{" not in l
    )
    moved = int(float(metrics.get("ataman_layout_copy_bytes_moved_total", "0")))
    print(f"== plan: the new node gets {ideal} bytes (each key once); it copied {moved} bytes: {moved / ideal:.3f}x")
    if tset == 0:
        print("== NOT settled within the load's window")
        sys.exit(0)
    took = tset - tadd
    print(f"== settled {took:.1f} s after the add; copy rate {moved / took / 1048576:.1f} MiB/s = "
          f"{moved / took / limit * 100:.0f}% of --anti-entropy-rate-bytes {limit / 1048576:.0f} MiB/s")
    # The copy's own window on the new node (its log): from copying started to
    # complete, without the node's start, the ack wait and the settling.
    import datetime
    def stamp(what):
        for line in open(f"{r}/start.err"):
            if line.startswith("node 3: ") and f"layout transition: copying {what}" in line:
                t = line.split()[2].rstrip("Z")
                return datetime.datetime.fromisoformat(t).timestamp()
    started, done = stamp("started"), stamp("complete")
    if started and done and done > started:
        window = done - started
        print(f"== copy window {window:.1f} s (new node's log): {moved / window / 1048576:.1f} MiB/s = "
              f"{moved / window / limit * 100:.0f}% of the limit")
series = json.load(open(f"{r}/load.json"))["series"]
offered = json.load(open(f"{r}/load.json"))["offered_rps"]
def phase(name, a, b):
    s = [x for x in series if a <= x["second"] < b]
    if not s:
        return
    rate = sum(x["requests"] for x in s) / len(s)
    p99 = [x["p99_ms"] for x in s]
    bad = sum(x["non_2xx"] + x["errors"] for x in s)
    print(f"== {name:7} {len(s):4} s: {rate:8.0f} req/s ({rate / offered * 100:5.1f}% of {offered:.0f}), "
          f"p99 per second median {statistics.median(p99):7.2f} ms, mean {statistics.mean(p99):7.2f} ms, "
          f"worst {max(p99):8.2f} ms, seconds over 100 ms {sum(p > 100 for p in p99)}, non-2xx+errors {bad}")
add_s, set_s = int(tadd - t0), int(tset - t0) + 1
phase("before", 2, add_s)
phase("during", add_s, set_s)
phase("after", set_s, set_s + 30)
# The whole run's latency from each request's actual send (not its
# intended start): what the server answered in, without the generator's
# own backlog.
u = json.load(open(f"{r}/load.json"))["uncorrected_latency_ms"]
print(f"== whole run, from actual send: p50 {u['p50']:.2f} ms, p99 {u['p99']:.2f} ms, "
      f"p99.9 {u['p99.9']:.2f} ms, max {u['max']:.2f} ms")
# And from each request's intended start (what wrk2 reports: a stall
# counts for every request the generator could not send on time).
c = json.load(open(f"{r}/load.json"))["latency_ms"]
print(f"== whole run, from intended start: p50 {c['p50']:.2f} ms, p99 {c['p99']:.2f} ms, "
      f"p99.9 {c['p99.9']:.2f} ms, max {c['max']:.2f} ms")
PY
