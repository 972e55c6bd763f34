#!/usr/bin/env python3
"""The tables of docs/RELIABILITY.md from the reports scripts/reliability-runs.sh wrote."""
import glob, json, statistics, sys

out = sys.argv[1] if len(sys.argv) > 1 else "reliability-out"
KINDS = ["kill", "pause", "partition", "oneway", "delay", "wipe", "diskfull", "clock", "all"]

def load(pattern):
    return [json.load(open(p)) for p in sorted(glob.glob(f"{out}/{pattern}"))]

print("| faults | runs | operations (ok / maybe / fail / hang) | faults injected | acknowledged writes lost | RYW violations | other violations | convergence ms (median, max) | passed |")
print("|---|---|---|---|---|---|---|---|---|")
for kind in KINDS:
    rs = load(f"{kind}-*.json")
    if not rs:
        continue
    ops = sum(r["operations"]["total"] for r in rs)
    by = {k: sum(r["operations"]["by_outcome"].get(k, 0) for r in rs) for k in ["ok", "maybe", "fail", "hang"]}
    injected = {}
    for r in rs:
        for k, v in r["faults_injected"].items():
            injected[k] = injected.get(k, 0) + v
    inj = ", ".join(f"{k} {v}" for k, v in sorted(injected.items()) if v)
    lost = sum(r["acknowledged_writes_lost"] for r in rs)
    ryw = sum(r["ryw_violations"] for r in rs)
    other = sum(r["violations"] for r in rs) - lost - ryw
    conv = [r["convergence"]["time_ms"] for r in rs if r.get("convergence")]
    conv_s = f"{statistics.median(conv):.0f}, {max(conv)}" if conv else "-"
    passed = sum(1 for r in rs if r["passed"])
    print(f"| {kind} | {len(rs)} | {ops} ({by['ok']} / {by['maybe']} / {by['fail']} / {by['hang']}) | {inj} | {lost} | {ryw} | {other} | {conv_s} | {passed}/{len(rs)} |")

print()
print("| negative control | runs | operations | kills | acknowledged writes lost per run | runs that caught it |")
print("|---|---|---|---|---|---|")
for bug in ["yes", "no"]:
    rs = load(f"planted-{bug}-*.json")
    if not rs:
        continue
    ops = sum(r["operations"]["total"] for r in rs)
    kills = sum(r["faults_injected"].get("kill", 0) for r in rs)
    lost = [r["acknowledged_writes_lost"] for r in rs]
    caught = sum(1 for x in lost if x > 0)
    label = "--planted-bug ack-before-wal" if bug == "yes" else "same, without the bug"
    print(f"| {label} | {len(rs)} | {ops} | {kills} | {', '.join(map(str, lost))} | {caught}/{len(rs)} |")
