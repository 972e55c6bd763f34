//! RESP `SCAN` on a connection: the cursor becomes a resume key, a range
//! thread reads the page ([`crate::range::page_thread`]), and the page's
//! reply fills the command's slot in order, so pipelined commands around a
//! `SCAN` are answered in the order they came (docs/RESP.md).

use super::{Conn, Slot};
use crate::net::answer::{Answer, Failure};
use crate::net::membership_gate;
use crate::net::resp::auth;
use crate::net::resp::encode::{self, Proto, Reply};
use crate::net::resp::scan::{self, ScanArgs, UNKNOWN_CURSOR};
use crate::net::resp::table::failure_reply;
use crate::range::page_thread::{self, PageReceiver};
use crate::state::{NetContext, NodeShared};

/// A `SCAN` slot: its page's range thread, and how to reply.
pub struct ScanWait {
    page: PageReceiver,
    pattern: Option<Vec<u8>>,
    proto: Proto,
}

impl Conn {
    /// Starts the page `args` asks for, or answers at once (an error, an
    /// unknown cursor, or a `TYPE` no key has).
    pub(super) fn scan(&mut self, ctx: &NetContext, token: usize, args: ScanArgs) {
        let Some(state) = self.resp.as_ref() else {
            return;
        };
        // A read of every key: the read role.
        let every_key = [scan::every_key()];
        if let Err(denied) = auth::admit_named(&ctx.shared.auth, &state.session, "scan", &every_key)
        {
            return self.reply_now(&denied);
        }
        // A node that is not a member (joining, removed) serves no
        // client's data, as `dispatch` refuses its reads: its own copy is
        // partial or gone.
        if let Some(Answer::Failed(failure, why)) =
            membership_gate::refusal(&ctx.shared.transition, &every_key[0])
        {
            return self.reply_now(&failure_reply(failure, &why));
        }
        let Some(start) = scan::resume_key(args.cursor) else {
            return self.reply_now(&Reply::err(UNKNOWN_CURSOR));
        };
        if !args.strings {
            return self.reply_now(&scan::page_reply(Vec::new(), None, None));
        }
        let (ack, from) = match state.session.ack_from(super::resp_side::resp_limits(ctx)) {
            Ok(pair) => pair,
            Err(e) => return self.reply_now(&Reply::err(e)),
        };
        let plan = crate::range::Plan {
            start,
            end: None,
            ack,
            from,
        };
        let proto = state.session.proto;
        let wake = ctx.feed_wake(token, self.generation);
        match page_thread::start(&ctx.shared, NodeShared::range_node, wake, plan, args.count) {
            Ok(page) => self.push_slot(Slot::Scan(Box::new(ScanWait {
                page,
                pattern: args.pattern,
                proto,
            }))),
            Err(busy) => self.reply_now(&failure_reply(
                Failure::Busy,
                &format!("{busy}: retry the SCAN with the same cursor"),
            )),
        }
    }

    /// Replaces the front `SCAN` slot with its reply once its page is in;
    /// `true` when it was.
    pub(super) fn fill_from_scan(&mut self) -> bool {
        let Some(Slot::Scan(wait)) = self.slots.front_mut() else {
            return false;
        };
        let Some(result) = wait.page.poll() else {
            return false;
        };
        let reply = match result {
            Ok((keys, next)) => scan::page_reply(keys, next, wait.pattern.as_deref()),
            Err(reason) => failure_reply(Failure::NotEnoughReplicas, &reason),
        };
        let mut bytes = Vec::new();
        encode::encode(&mut bytes, &reply, wait.proto);
        if let Some(front) = self.slots.front_mut() {
            *front = Slot::Ready(bytes);
        }
        true
    }
}
