//! What a register simulation run does besides its seed.

/// A bug planted in the register rules, to see the checker catch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegisterBug {
    /// Acceptors accept a ballot below their promise
    /// (`acceptor::Mode::PlantedAcceptsBelowPromise`).
    AcceptsBelowPromise,
    /// During the layout transition a quorum is counted in the new replica
    /// set only (`quorum::Mode::PlantedNewSetOnly`).
    QuorumNewSetOnly,
    /// The proposer answers at the accept quorum, before a quorum stored
    /// the value (`proposer::Limits::planted_replies_before_commit`).
    RepliesBeforeCommit,
    /// A restarted acceptor forgets the promises it did not sync and keeps
    /// no restart floor (`record::restart_floor` left out).
    ForgetsPromises,
    /// A proposer's clock does not observe the highest ballot it saw, so a
    /// retry's ballot is only bumped above it (`proposer`, "Rules"): two
    /// operations of one node can take the same ballot.
    ReusesBallots,
}

impl RegisterBug {
    /// Every planted bug by its command-line name.
    pub const NAMES: [(&'static str, RegisterBug); 5] = [
        (
            "register-accepts-below-promise",
            RegisterBug::AcceptsBelowPromise,
        ),
        ("register-quorum-new-only", RegisterBug::QuorumNewSetOnly),
        (
            "register-replies-before-commit",
            RegisterBug::RepliesBeforeCommit,
        ),
        ("register-forgets-promises", RegisterBug::ForgetsPromises),
        ("register-reuses-ballots", RegisterBug::ReusesBallots),
    ];
}

/// A run's shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterSimConfig {
    /// Concurrent clients (each on one proposer node).
    pub clients: usize,
    /// Operations per client.
    pub ops_per_client: usize,
    /// Message loss, per mille.
    pub loss_per_mille: u64,
    /// Message duplication, per mille.
    pub duplicate_per_mille: u64,
    /// Acceptor crashes (each followed by a restart with its durable state).
    pub crashes: usize,
    /// A crashed acceptor stays down this long at most, ms.
    pub down_ms_max: u64,
    /// After a record write it did not sync (a promise), an acceptor
    /// crashes at once this often, per mille, and is back within
    /// [`BRIEF_DOWN_MS_MAX`] (the worst case for a forgotten promise).
    pub crash_after_unsynced_per_mille: u64,
    /// A planted bug.
    pub bug: Option<RegisterBug>,
}

impl Default for RegisterSimConfig {
    fn default() -> RegisterSimConfig {
        RegisterSimConfig {
            clients: 4,
            ops_per_client: 12,
            loss_per_mille: 50,
            duplicate_per_mille: 30,
            crashes: 3,
            down_ms_max: DOWN_MS_MAX,
            crash_after_unsynced_per_mille: 10,
            bug: None,
        }
    }
}

/// The acceptors of every run: ids `0..ACCEPTORS`.
pub const ACCEPTORS: usize = 5;
/// The replica set before the transition.
pub const OLD_SET: [u16; 3] = [0, 1, 2];
/// The replica set the transition moves to (shares node 2 with the old).
pub const NEW_SET: [u16; 3] = [2, 3, 4];
/// The transition starts at this virtual time, ms.
pub const TRANSITION_AT_MS: u64 = 150;
/// An operation started during the transition uses the old set alone
/// (its node has not learned the new layout yet) this often, percent.
pub const STALE_VIEW_PERCENT: u64 = 35;
/// A round without a quorum ends after this long, ms.
pub const ROUND_TIMEOUT_MS: u64 = 60;
/// Network delay bounds, ms (a random delay in between reorders messages).
pub const DELAY_MS_MIN: u64 = 1;
/// See [`DELAY_MS_MIN`].
pub const DELAY_MS_MAX: u64 = 25;
/// A crashed acceptor stays down this long at most, ms, by default.
pub const DOWN_MS_MAX: u64 = 200;
/// A crash right after an unsynced write lasts this long at most, ms.
pub const BRIEF_DOWN_MS_MAX: u64 = 3;
/// A client waits this long at most between operations, ms.
pub const THINK_MS_MAX: u64 = 30;
/// An acceptor's clock reservation runs at most this far (clock units,
/// before the node bits) past the newest ballot it stored a promise of.
pub const LEASE_MAX: u64 = 500_000;
/// The proposers' clocks are skewed by up to this much, ms.
pub const SKEW_MS_MAX: u64 = 40;
