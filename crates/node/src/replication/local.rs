//! The local replica: reads from this node's engine on the spot, and
//! writes queued for the engine with the loop iteration's other writes.

use super::coordinator::ReplicaAnswer;
use crate::peer::frame::Stamped;
use crate::state::{NetContext, Target};
use ataman_engine::{Submission, WriteBatch};

/// The local replica's answer to a read: refused while refilling (its
/// copies may be missing), else the engine's newest version of `key`.
pub fn local_read(ctx: &NetContext, key: &[u8]) -> ReplicaAnswer {
    if ctx.shared.refill.active() {
        return ReplicaAnswer::Failed(format!("local replica: {}", crate::refill::REFUSAL));
    }
    match ctx.db.get(key) {
        Ok(entry) => ReplicaAnswer::Read(entry.map(Stamped::from_entry)),
        Err(e) => ReplicaAnswer::Failed(format!("local replica: read failed: {e}")),
    }
}

/// Queues a write of `version` to the local engine (handed over with the
/// loop iteration's other writes); `target` hears the outcome.
pub fn local_write(ctx: &NetContext, key: &[u8], version: &Stamped, target: Target) {
    let mut batch = WriteBatch::new();
    version.add_to(&mut batch, key);
    ctx.pending_writes.borrow_mut().push(Submission {
        batch,
        durability: ctx.shared.write_durability,
        done: ctx.completions.callback(target),
        condition: None,
    });
}
