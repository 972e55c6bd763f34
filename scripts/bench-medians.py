#!/usr/bin/env python3
"""Medians (and the individual runs) of the JSON files scripts/bench-engine-runs.sh wrote."""
import glob, json, statistics, sys

out = sys.argv[1] if len(sys.argv) > 1 else "bench-out"

def load(pattern):
    return [json.load(open(p)) for p in sorted(glob.glob(f"{out}/{pattern}"))]

def fmt(values, digits=0):
    med = statistics.median(values)
    runs = ", ".join(f"{v:.{digits}f}" for v in values)
    return f"**{med:.{digits}f}** ({runs})"

for dur in ["complete", "none"]:
    print(f"\n### engine, batch 1, durability {dur}, wal fsync\n")
    print("| writers | ops | ops/s | p50 us | p99 us | p99.9 us | WAL writes/s | mean batch | max batch | fsyncs/s | CPU s/Mop |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for w in [1, 100, 1000]:
        rs = load(f"engine-w{w}-{dur}-*.json")
        if not rs:
            continue
        col = lambda f, d=0: fmt([f(r) for r in rs], d)
        print(f"| {w} | {rs[0]['ops']} | {col(lambda r: r['ops_per_sec'])} | {col(lambda r: r['latency_us']['p50'], 1)} | "
              f"{col(lambda r: r['latency_us']['p99'], 1)} | {col(lambda r: r['latency_us']['p99.9'], 1)} | "
              f"{col(lambda r: r['wal_writes_per_sec'])} | {col(lambda r: r['mean_batch'], 1)} | "
              f"{col(lambda r: r['max_batch'])} | {col(lambda r: r['fsyncs_per_sec'])} | {col(lambda r: r['cpu_sec_per_mop'], 2)} |")

rs = load("engine-readrandom-*.json")
if rs:
    print("\n### readrandom\n")
    print(f"reads/s {fmt([r['reads_per_sec'] for r in rs])}; read p50 us {fmt([r['read_latency_us']['p50'] for r in rs], 1)}; "
          f"p99 us {fmt([r['read_latency_us']['p99'] for r in rs], 1)}; p99.9 us {fmt([r['read_latency_us']['p99.9'] for r in rs], 1)}; "
          f"read keys {rs[0]['read_keys']}; levels {rs[0]['level_files']}")

for name in ["1m", "10m"]:
    rs = load(f"recovery-{name}-*.json")
    if not rs:
        continue
    print(f"\n### recovery, {rs[0]['rows']} rows, {rs[0]['wal_bytes'] // 2**20} MiB WAL\n")
    print("| reader thread | reopen s | replay s | replay rows/s |")
    print("|---|---|---|---|")
    for side in ["reader_thread_on", "reader_thread_off"]:
        print(f"| {side.split('_')[-1]} | {fmt([r[side]['reopen_sec'] for r in rs], 2)} | {fmt([r[side]['replay_sec'] for r in rs], 2)} | "
              f"{fmt([r[side]['replay_rows_per_sec'] for r in rs])} |")
    print(f"\nreplay rate on/off {fmt([r['replay_rate_ratio_on_off'] for r in rs], 2)}; "
          f"reopen speedup on/off {fmt([r['reopen_speedup_on_off'] for r in rs], 2)}")

rs = load("fjall-*.json")
if rs:
    print("\n### ataman vs fjall\n")
    print("| phase | ops | ataman ops/s | fjall ops/s | ataman/fjall | ataman CPU s/Mop | fjall CPU s/Mop |")
    print("|---|---|---|---|---|---|---|")
    for i, p in enumerate(rs[0]["phases"]):
        col = lambda k, d=0: fmt([r["phases"][i][k] for r in rs], d)
        print(f"| {p['phase']} | {p['ops']} | {col('ataman_ops_per_sec')} | {col('fjall_ops_per_sec')} | {col('ratio', 2)} | "
              f"{col('ataman_cpu_sec_per_mop', 2)} | {col('fjall_cpu_sec_per_mop', 2)} |")
    print(f"\nsettle s: ataman {fmt([r['settle_sec'][0] for r in rs], 2)}, fjall {fmt([r['settle_sec'][1] for r in rs], 2)}")
