//! What disturbs a run: faults (crashes, cuts, loss, skew, disk faults,
//! dropped hints), restarts, flushes and compactions, and anti-entropy
//! rounds while the workload runs.

use super::{ANTI_ENTROPY_GAP_MS, Event, MAINTENANCE_GAP_MS, Sim};
use crate::config::CrashKind;
use crate::faults::{self, Fault};
use crate::history::{Happening, OpResult};
use crate::node::{Reopened, SimNode};

impl Sim {
    pub(super) fn check_disk(&mut self, node: usize) {
        let n = &mut self.nodes[node];
        if n.restart_scheduled || !n.poisoned() {
            return;
        }
        n.restart_scheduled = true;
        let after = self.between(faults::DISK_RESTART_MS);
        self.world.schedule(
            after,
            Event::Restart {
                node,
                kill_first: true,
            },
        );
    }

    // ---- faults ----

    pub(super) fn fault_record(&mut self, what: String) {
        let at_ms = self.now();
        self.history
            .happenings
            .push(Happening::Fault { at_ms, what });
    }

    pub(super) fn count_fault(&mut self, name: &'static str) {
        *self.stats.faults.entry(name).or_insert(0) += 1;
    }

    pub(super) fn fault_tick(&mut self) {
        let up: Vec<bool> = self.nodes.iter().map(SimNode::is_up).collect();
        let fault = faults::choose(&mut self.world.rng, &self.config.faults, &up);
        if let Some(fault) = fault {
            self.apply(fault);
        }
        let gap = faults::gap_ms(&mut self.world.rng);
        self.world.schedule(gap, Event::FaultTick);
    }

    pub(super) fn apply(&mut self, fault: Fault) {
        let now = self.now();
        match &fault {
            Fault::Crash {
                node,
                kind,
                down_ms,
                image_seed,
            } => {
                self.count_fault(match kind {
                    CrashKind::PowerLoss => "crash (power loss)",
                    CrashKind::Kill => "crash (kill -9)",
                });
                self.crash(*node, *kind, *image_seed);
                self.world.schedule(
                    *down_ms,
                    Event::Restart {
                        node: *node,
                        kill_first: false,
                    },
                );
                return;
            }
            Fault::Partition { minority, heal_ms } => {
                self.count_fault("partition");
                for a in 0..self.nodes.len() {
                    for b in 0..self.nodes.len() {
                        if minority.contains(&a) && !minority.contains(&b) {
                            self.network.cut(a, b, now + heal_ms, now);
                            self.network.cut(b, a, now + heal_ms, now);
                        }
                    }
                }
            }
            Fault::OneWayCut { from, to, heal_ms } => {
                self.count_fault("one-way cut");
                self.network.cut(*from, *to, now + heal_ms, now);
            }
            Fault::Loss { per_mille, for_ms } => {
                self.count_fault("message loss");
                self.network.lossy(*per_mille, now + for_ms);
            }
            Fault::Skew { node, skew_ms } => {
                self.count_fault("clock skew");
                self.nodes[*node].set_skew(*skew_ms);
                let skew = &mut self.history.skew_ms_max;
                *skew = (*skew).max(skew_ms.unsigned_abs());
            }
            Fault::Disk {
                node,
                op,
                file,
                nth,
                kind,
            } => {
                self.count_fault("disk fault");
                let fault = ataman_engine::fs::sim::Fault::new(*op, *nth, *kind);
                self.nodes[*node].inject(fault.on_paths_containing(file));
            }
            Fault::DropHints { node } => {
                self.count_fault("hints dropped");
                self.nodes[*node].hints.drop_all();
            }
        }
        self.fault_record(format!("{fault:?}"));
    }

    /// Node `node` crashes: its requests in flight are never answered.
    pub(super) fn crash(&mut self, node: usize, kind: CrashKind, image_seed: u64) {
        let orphans = self.nodes[node].driver.waiting();
        self.nodes[node].crash(kind, image_seed);
        let at_ms = self.now();
        self.history
            .happenings
            .push(Happening::Crash { at_ms, node, kind });
        for op in orphans {
            self.complete(op, OpResult::Unknown);
        }
    }

    pub(super) fn restart(&mut self, node: usize) {
        let reopened = self.nodes[node].restart();
        self.record_restart(node, reopened);
    }

    pub(super) fn record_restart(&mut self, node: usize, reopened: Reopened) {
        self.stats.restarts += 1;
        let state = self.nodes[node].state().unwrap_or_default();
        let at_ms = self.now();
        self.history.happenings.push(Happening::Restart {
            at_ms,
            node,
            reopened,
            state,
        });
    }

    pub(super) fn maintenance(&mut self) {
        let up: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].is_up())
            .collect();
        if !up.is_empty() {
            let node = up[self.world.rng.index(up.len())];
            let compact = self.world.rng.below(100) < 30;
            self.stats.maintenance += 1;
            let orphans = self.nodes[node].driver.waiting();
            let before = self.nodes[node].incarnation();
            let restarted = if compact {
                self.nodes[node].compact()
            } else {
                self.nodes[node].flush()
            };
            if self.nodes[node].incarnation() != before {
                // A disk fault fired during the flush: the process died and restarted.
                let at_ms = self.now();
                self.history.happenings.push(Happening::Crash {
                    at_ms,
                    node,
                    kind: CrashKind::Kill,
                });
                for op in orphans {
                    self.complete(op, OpResult::Unknown);
                }
                self.record_restart(node, restarted.unwrap_or(Reopened::Clean));
            }
        }
        let gap = self.between(MAINTENANCE_GAP_MS);
        self.world.schedule(gap, Event::Maintenance);
    }

    /// An anti-entropy round between two random nodes that are up and can
    /// reach each other both ways; depths other than the real one make
    /// buckets hold several keys.
    pub(super) fn anti_entropy_tick(&mut self) {
        let now = self.now();
        let n = self.nodes.len();
        if n >= 2 {
            let a = self.world.rng.index(n);
            let b = (a + 1 + self.world.rng.index(n - 1)) % n;
            let depth = [1, 4, ataman_node::antientropy::merkle::DEPTH][self.world.rng.index(3)];
            let reachable = !self.network.is_cut(a, b, now) && !self.network.is_cut(b, a, now);
            if reachable && self.nodes[a].is_up() && self.nodes[b].is_up() {
                self.anti_entropy(a, b, depth);
            }
        }
        let gap = self.between(ANTI_ENTROPY_GAP_MS);
        self.world.schedule(gap, Event::AntiEntropy);
    }
}
