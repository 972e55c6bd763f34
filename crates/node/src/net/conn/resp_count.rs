//! RESP `DBSIZE` and `INFO` with its `# Keyspace` on a connection: the
//! keys are counted on a range thread ([`crate::range::job_thread`],
//! [`crate::net::resp::keyspace`]), never on the network thread, and the
//! reply fills the command's slot in order, as a `SCAN` page does.

use super::{Conn, Slot};
use crate::net::answer::Failure;
use crate::net::resp::encode::{self, Proto, Reply};
use crate::net::resp::info::{self, Figures};
use crate::net::resp::keyspace::{self, Keyspace};
use crate::net::resp::table::failure_reply;
use crate::range::job_thread::{self, JobReceiver};
use crate::state::{NetContext, NodeShared};

/// What a counted reply becomes once the keys are counted.
pub enum Counted {
    /// `DBSIZE`: the keys.
    DbSize,
    /// `INFO`: these sections of these figures, the keys filled in.
    Info(Vec<String>, Box<Figures>),
}

/// A slot waiting for its count's range thread.
pub struct CountWait {
    job: JobReceiver<Keyspace>,
    counted: Counted,
    proto: Proto,
}

impl Conn {
    /// Starts counting the keys for `counted` on a range thread; answers
    /// `-TRYAGAIN` at once when every range thread is busy.
    pub(super) fn count_keys(&mut self, ctx: &NetContext, token: usize, counted: Counted) {
        let proto = self.resp.as_ref().map_or(Proto::Resp2, |r| r.session.proto);
        let wake = ctx.feed_wake(token, self.generation);
        let job = |shared: &NodeShared| keyspace::count(&shared.db, crate::hlc::wall_ms());
        match job_thread::start(&ctx.shared, |s| &s.ranges, job, wake) {
            Ok(job) => self.push_slot(Slot::Count(Box::new(CountWait {
                job,
                counted,
                proto,
            }))),
            Err(busy) => self.reply_now(&failure_reply(
                Failure::Busy,
                &format!("{busy}: retry the command"),
            )),
        }
    }

    /// Replaces the front count slot with its reply once its keys are
    /// counted; `true` when it was.
    pub(super) fn fill_from_count(&mut self) -> bool {
        let Some(Slot::Count(wait)) = self.slots.front_mut() else {
            return false;
        };
        let Some(result) = wait.job.poll() else {
            return false;
        };
        let reply = match (result, &mut wait.counted) {
            (Ok(keys), Counted::DbSize) => Reply::Int(i64::try_from(keys.keys).unwrap_or(i64::MAX)),
            (Ok(keys), Counted::Info(sections, figures)) => {
                figures.keyspace = keys;
                Reply::text(info::render(sections, figures))
            }
            (Err(why), _) => failure_reply(Failure::Internal, &why),
        };
        let mut bytes = Vec::new();
        encode::encode(&mut bytes, &reply, wait.proto);
        if let Some(front) = self.slots.front_mut() {
            *front = Slot::Ready(bytes);
        }
        true
    }
}
