//! A local range's answer streamed from its scan, chunk by chunk, as the
//! output buffer has room (`Slot::Stream`); a HEAD's is its head alone
//! (`super::head_only`).

use super::{Conn, STREAM_BUFFER_BYTES, Slot};
use crate::api::Route;
use crate::http::Status;
use crate::http::response::{write_chunk, write_chunked_head, write_last_chunk};
use crate::net::dispatch::Encoding;
use crate::state::NetContext;

impl Conn {
    /// Moves the front range's entries to the output buffer while it has
    /// room; `true` when the answer is complete (the slot is gone).
    pub(super) fn fill_from_stream(&mut self, ctx: &NetContext) -> bool {
        let head_only = self.heads.is_head(self.base_slot);
        let Some(Slot::Stream {
            iter,
            encoding,
            head_written,
            persist,
            started,
        }) = self.slots.front_mut()
        else {
            return false;
        };
        if !*head_written {
            let content_type = match encoding {
                Encoding::Values => "application/octet-stream",
                Encoding::Versions => crate::range::wire::CONTENT_TYPE,
            };
            write_chunked_head(&mut self.out, Status::Ok, content_type, *persist);
            *head_written = true;
        }
        // A HEAD's answer is the head: the scan is not read.
        let mut finished = head_only;
        while !finished && self.out.len() - self.out_pos < STREAM_BUFFER_BYTES {
            match iter.next() {
                Some(Ok((key, entry))) => match encoding {
                    Encoding::Values => {
                        let value = entry.value.unwrap_or_default();
                        write_chunk(&mut self.out, &[&key, b"\n", &value]);
                    }
                    Encoding::Versions => {
                        let value = entry.value.as_deref();
                        let expiring = entry.deadline_ms.is_some();
                        let h = crate::range::wire::header(&key, entry.ts, value, expiring);
                        let value = value.unwrap_or_default();
                        write_chunk(&mut self.out, &[&h, &key, value]);
                    }
                },
                Some(Err(_)) => {
                    // The head went out as 200: the only honest signal
                    // left is to cut the connection without the last chunk.
                    self.close_after = true;
                    self.slots.clear();
                    return false;
                }
                None => {
                    write_last_chunk(&mut self.out);
                    finished = true;
                }
            }
        }
        if !finished {
            return false;
        }
        let route = match encoding {
            Encoding::Values => Route::Entities,
            Encoding::Versions => Route::InternalRange,
        };
        ctx.shared.metrics.record(route, Status::Ok, *started);
        self.pop_slot();
        true
    }
}
