//! The figures of a run: printed at the end and written as JSON
//! (`--report FILE.json`).

use super::cas::CasCall;
use super::cas::check::CasFindings;
use super::checker::{Findings, Tally};
use super::faults::FaultKind;
use super::history::{History, OpKind, OpOutcome};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The `cas` outcomes, in the report's order (`cas::check::outcome_name`).
const OUTCOMES: [&str; 4] = ["ok", "applied", "unknown", "refused"];

/// A run's figures.
#[derive(Debug, Clone)]
pub struct Report {
    /// The history checked.
    pub history: History,
    /// What the checker found.
    pub findings: Findings,
    /// Where the history was written.
    pub history_path: Option<PathBuf>,
    /// Wall time of the whole run, seconds.
    pub elapsed_s: f64,
}

fn tally_json(t: &Tally) -> Value {
    json!({
        "count": t.count,
        "examples": t.examples.iter().map(|e| e.0.clone()).collect::<Vec<_>>(),
    })
}

impl Report {
    /// Operations by outcome.
    pub fn outcomes(&self) -> BTreeMap<&'static str, u64> {
        let mut by = BTreeMap::new();
        for o in [
            OpOutcome::Ok,
            OpOutcome::Fail,
            OpOutcome::Maybe,
            OpOutcome::Hang,
        ] {
            by.insert(o.name(), 0);
        }
        for op in &self.history.ops {
            *by.entry(op.outcome.name()).or_default() += 1;
        }
        by
    }

    /// Faults injected, by kind (every enabled kind listed, 0 included).
    pub fn faults(&self) -> BTreeMap<&'static str, u64> {
        let mut by = BTreeMap::new();
        for name in &self.history.meta.faults {
            if let Some(kind) = FaultKind::parse(name) {
                by.insert(kind.name(), 0);
            }
        }
        for f in &self.history.faults {
            *by.entry(f.kind.name()).or_default() += 1;
        }
        by
    }

    /// Violations found.
    pub fn violations(&self) -> u64 {
        self.findings.violations()
    }

    /// True when the checker found nothing.
    pub fn passed(&self) -> bool {
        self.violations() == 0
    }

    /// The report as JSON.
    pub fn to_json(&self) -> Value {
        let m = &self.history.meta;
        let f = &self.findings;
        let mut by_kind = BTreeMap::new();
        for k in [OpKind::Put, OpKind::Get, OpKind::Delete] {
            by_kind.insert(k.name(), 0u64);
        }
        for op in &self.history.ops {
            *by_kind.entry(op.kind.name()).or_default() += 1;
        }
        let final_reads: BTreeMap<&str, Value> = f
            .final_reads
            .iter()
            .map(|(w, r)| {
                (
                    w.name(),
                    json!({"keys": r.keys, "found": r.found, "not_found": r.not_found, "unanswered": r.unanswered}),
                )
            })
            .collect();
        let convergence = self.history.convergence.as_ref().map(|c| {
            json!({
                "converged": c.converged, "time_ms": c.time_ms, "readings": c.readings,
                "repair": c.repair, "divergent_keys": f.divergent.count,
                "collected_tombstones": c.collected_tombstones,
                "collected_expired": c.collected_expired,
            })
        });
        let examples = json!({
                "lost": tally_json(&f.lost),
                "ryw": tally_json(&f.ryw),
                "impossible": tally_json(&f.impossible),
                "expiry": tally_json(&f.expiry),
                "regressed": tally_json(&f.regressed),
                "bad_answers": tally_json(&f.bad_answers),
                "hangs": tally_json(&f.hangs),
                "divergent": tally_json(&f.divergent),
                "same_timestamp": tally_json(&f.same_timestamp),
                "foreign_stamps": tally_json(&f.foreign_stamps),
                "crashes": tally_json(&f.crashes),
                "final_unanswered": tally_json(&f.final_unanswered),
        });
        let mut report = json!({
            "seed": m.seed,
            "runs": 1,
            "passed": self.passed(),
            "violations": self.violations(),
            "nodes": m.nodes,
            "duration_s": m.duration_s,
            "elapsed_s": self.elapsed_s,
            "ack_w": m.ack_w, "ack_r": m.ack_r, "from": m.from,
            "clients": m.clients,
            "workloads": m.workloads,
            "faults_enabled": m.faults,
            "planted_bug": m.planted_bug,
            "operations": {
                "total": self.history.ops.len(),
                "by_outcome": self.outcomes(),
                "by_kind": by_kind,
            },
            "faults_injected": self.faults(),
            "membership_steps": self.history.faults.iter()
                .filter(|f| f.kind.is_membership())
                .map(|f| json!({
                    "kind": f.kind.name(), "targets": f.targets,
                    "start_ms": f.start_us / 1000, "end_ms": f.end_us / 1000,
                    "detail": f.detail,
                }))
                .collect::<Vec<_>>(),
            "acknowledged_writes_lost": f.lost.count,
            "ryw_violations": f.ryw.count,
            "impossible_reads": f.impossible.count,
            "expiry_violations": f.expiry.count,
            "seen_then_gone": f.regressed.count,
            "non_monotonic_reads": f.non_monotonic,
            "exact_versions": f.exact,
            "bad_answers": f.bad_answers.count,
            "hangs": f.hangs.count,
            "hangs_on_paused_node": f.hangs_excused,
            "crashes": f.crashes.count,
            "same_timestamp": f.same_timestamp.count,
            "foreign_stamps": f.foreign_stamps.count,
            "convergence": convergence,
            "final_reads": final_reads,
            "final_reads_unanswered": f.final_unanswered.count,
            "history": self.history_path.as_ref().map(|p| p.display().to_string()),
        });
        report["examples"] = examples;
        report["linearizability_violations"] = json!(f.cas.violations);
        report["undecided_keys"] = json!(f.cas.undecided_keys);
        report["cas"] = cas_json(&f.cas);
        report["fault_events"] = self
            .history
            .faults
            .iter()
            .map(|f| {
                json!({
                    "kind": f.kind.name(), "targets": f.targets,
                    "start_ms": f.start_us / 1000, "end_ms": f.end_us / 1000, "detail": f.detail,
                })
            })
            .collect();
        report
    }

    /// Writes the JSON report to `path`.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(&self.to_json()).map_err(std::io::Error::other)?;
        std::fs::write(path, text + "\n")
    }

    /// The human-readable summary.
    pub fn text(&self) -> String {
        let m = &self.history.meta;
        let f = &self.findings;
        let mut s = String::new();
        let join = |map: BTreeMap<&str, u64>| {
            map.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            s,
            "seed {} | {} nodes | {} s | ack_w {} ack_r {} from {} | {} clients | workloads {} | planted bug {}",
            m.seed,
            m.nodes,
            m.duration_s,
            m.ack_w,
            m.ack_r,
            m.from,
            m.clients,
            m.workloads.join(","),
            m.planted_bug.as_deref().unwrap_or("none"),
        );
        let _ = writeln!(
            s,
            "operations: {} ({})",
            self.history.ops.len(),
            join(self.outcomes())
        );
        let _ = writeln!(s, "faults injected: {}", join(self.faults()));
        let _ = writeln!(s, "acknowledged writes lost: {}", f.lost.count);
        let _ = writeln!(s, "read-your-writes violations: {}", f.ryw.count);
        let _ = writeln!(s, "impossible reads: {}", f.impossible.count);
        let _ = writeln!(s, "expiry violations: {}", f.expiry.count);
        let _ = writeln!(s, "versions seen, then gone: {}", f.regressed.count);
        let _ = writeln!(
            s,
            "judged by: {} (non-monotonic reads, not counted: {})",
            if f.exact {
                "versions (exact)"
            } else {
                "values and times"
            },
            f.non_monotonic
        );
        let _ = writeln!(s, "answers outside the contract: {}", f.bad_answers.count);
        let _ = writeln!(
            s,
            "hangs: {} (on a paused node, not counted: {})",
            f.hangs.count, f.hangs_excused
        );
        let _ = writeln!(s, "crashes: {}", f.crashes.count);
        let _ = writeln!(
            s,
            "one timestamp, two contents: {}; stamped with another node's id: {}",
            f.same_timestamp.count, f.foreign_stamps.count
        );
        match &self.history.convergence {
            Some(c) => {
                let _ = writeln!(
                    s,
                    "convergence: {} in {} ms ({} readings of every copy), {} keys divergent; {}",
                    if c.converged {
                        "reached"
                    } else {
                        "NOT reached"
                    },
                    c.time_ms,
                    c.readings,
                    f.divergent.count,
                    c.repair
                );
                let _ = writeln!(
                    s,
                    "collected during the run: {} tombstones, {} expired values",
                    c.collected_tombstones, c.collected_expired
                );
            }
            None => {
                let _ = writeln!(s, "convergence: not checked");
            }
        }
        for (w, r) in &f.final_reads {
            let _ = writeln!(
                s,
                "final reads {}: {} keys, {} found, {} not found, {} unanswered",
                w.name(),
                r.keys,
                r.found,
                r.not_found,
                r.unanswered
            );
        }
        if f.cas.ops > 0 {
            cas_text(&f.cas, &mut s);
        }
        for (name, t) in [
            ("lost", &f.lost),
            ("read-your-writes", &f.ryw),
            ("impossible", &f.impossible),
            ("expiry", &f.expiry),
            ("seen-then-gone", &f.regressed),
            ("answer", &f.bad_answers),
            ("hang", &f.hangs),
            ("divergent", &f.divergent),
            ("one timestamp, two contents", &f.same_timestamp),
            ("stamped with another node's id", &f.foreign_stamps),
            ("crash", &f.crashes),
            ("final unanswered", &f.final_unanswered),
        ] {
            for e in t.examples.iter().take(5) {
                let _ = writeln!(s, "  {name}: {}", e.0);
            }
        }
        let history = self
            .history_path
            .as_ref()
            .map_or("not written".to_string(), |p| p.display().to_string());
        if self.passed() {
            let _ = writeln!(s, "PASS (seed {}, history {history})", m.seed);
        } else {
            let _ = writeln!(
                s,
                "FAIL: {} violations (seed {}, history {history})",
                self.violations(),
                m.seed
            );
        }
        s
    }
}

/// The `cas` workload's figures as JSON.
fn cas_json(c: &CasFindings) -> Value {
    let mut by_kind: BTreeMap<&str, BTreeMap<&str, u64>> = BTreeMap::new();
    for name in CasCall::NAMES {
        let row = by_kind.entry(name).or_default();
        for o in OUTCOMES {
            row.insert(o, 0);
        }
    }
    for ((call, outcome), n) in &c.by_kind {
        *by_kind
            .entry(call.as_str())
            .or_default()
            .entry(outcome.as_str())
            .or_default() += n;
    }
    let by_outcome: BTreeMap<&str, u64> =
        OUTCOMES.iter().map(|o| (*o, c.outcome_count(o))).collect();
    json!({
        "operations": c.ops,
        "by_kind": by_kind,
        "by_outcome": by_outcome,
        "unknown_share": share(c.outcome_count("unknown"), c.ops),
        "error_share": share(c.ops - c.outcome_count("ok"), c.ops),
        "unclassified_errors": c.unclassified_errors,
        "odd_replies": c.odd_replies,
        "keys": c.keys,
        "undecided_keys": c.undecided_keys,
        "linearizability_violations": c.violations,
        "witnesses": c.witnesses.iter().map(|w| json!({
            "key": w.key, "ops": w.ops, "history": w.history,
        })).collect::<Vec<_>>(),
        "counters": c.counters,
        "counters_unread": c.counters_unread,
        "counter_violations": c.counter_violations,
    })
}

/// `part / whole`, 0 for an empty whole.
fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// The `cas` workload's lines of the summary.
fn cas_text(c: &CasFindings, s: &mut String) {
    let outcomes: Vec<String> = OUTCOMES
        .iter()
        .map(|o| format!("{o} {}", c.outcome_count(o)))
        .collect();
    let _ = writeln!(
        s,
        "cas operations: {} ({}; unknown share {:.1}%, unclassified errors {}, odd replies {})",
        c.ops,
        outcomes.join(", "),
        100.0 * share(c.outcome_count("unknown"), c.ops),
        c.unclassified_errors,
        c.odd_replies,
    );
    let _ = writeln!(
        s,
        "cas linearizability: {} keys, {} violations, {} undecided; counters: {} checked, {} violations, {} unread",
        c.keys,
        c.violations,
        c.undecided_keys,
        c.counters,
        c.counter_violations.len(),
        c.counters_unread,
    );
    for w in &c.witnesses {
        let _ = writeln!(
            s,
            "  not linearizable: key {} ({} operations; its history, cut where it fails:)",
            w.key, w.ops
        );
        for line in &w.history {
            let _ = writeln!(s, "    {line}");
        }
    }
    for v in c.counter_violations.iter().take(5) {
        let _ = writeln!(s, "  counter: {v}");
    }
}
