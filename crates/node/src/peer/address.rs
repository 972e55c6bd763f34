//! Where a peer's name points: the address a link dials, kept per peer and
//! resolved again after the link failed, off the network threads.
//!
//! A peer named by host name (`http://ataman-2:19234`, a container's or a
//! pod's name) can come back at another address: a recreated container, a
//! rescheduled pod. A link that kept the first address forever would never
//! reach it again until this node restarted. So:
//!
//! - an IP literal (`127.0.0.1:7001`) is never resolved;
//! - a name is resolved the first time any link to the peer connects, on
//!   that link's thread (once per name and process, as before);
//! - after a link to the peer failed (refused, lost, silent) since the
//!   address was resolved, or while the name does not resolve, the next
//!   connect asks for a fresh resolution, at most once per
//!   [`RESOLVE_REFRESH_MIN`] and one at a time per peer, on a short-lived
//!   thread of its own: `getaddrinfo` may block for seconds on a DNS server
//!   that does not answer, and a network thread must not. The connect goes
//!   on with the address it has; the next one uses the fresh answer.
//!
//! [`plan`] is the rule (values in, decision out); [`AddressCache`] keeps
//! one peer's answer and runs the refreshes.
//!
//! # Thread safety
//! [`AddressCache`] is shared by every network thread's link to the peer
//! and the refresh thread: a mutex held only to read or store the entry,
//! never while resolving.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The shortest time between two resolutions of one peer's name: a link
/// failing in a loop (every 50 ms for client requests) asks the DNS server
/// at most twice a second.
pub const RESOLVE_REFRESH_MIN: Duration = Duration::from_millis(500);

/// Resolves `host:port` to one address (blocking); the seam tests replace.
pub type Resolver = fn(&str) -> Result<SocketAddr, String>;

/// The system's resolver (`getaddrinfo`: `/etc/hosts`, then DNS): the
/// first address it gives.
pub fn resolve_system(dial: &str) -> Result<SocketAddr, String> {
    match dial.to_socket_addrs() {
        Ok(mut addrs) => addrs
            .next()
            .ok_or_else(|| format!("{dial} resolves to nothing")),
        Err(e) => Err(format!("cannot resolve {dial}: {e}")),
    }
}

/// One resolution of a peer's name.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// What was resolved (`host:port`).
    pub dial: String,
    /// The address, or why there is none.
    pub result: Result<SocketAddr, String>,
    /// When the answer came.
    pub at: Instant,
    /// A refresh is under way.
    pub pending: bool,
}

/// What a link does about its peer's address before it connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddressPlan {
    /// Dial this address.
    Use(SocketAddr),
    /// Dial this address, and resolve the name again in the background.
    UseAndRefresh(SocketAddr),
    /// No address (the name did not resolve): fail the connect with this.
    Fail(String),
    /// [`AddressPlan::Fail`], and resolve the name again in the background.
    FailAndRefresh(String),
    /// Nothing resolved yet for this name: resolve it now, on this thread.
    ResolveNow,
}

/// The rule: what a link dialing `dial` does, given the last resolution
/// (`entry`), when the link last failed (`failed_at`) and `now`.
/// `resolve_once` is the old behaviour (a name's address is kept for the
/// process's life), the negative control.
pub fn plan(
    entry: Option<&Resolved>,
    dial: &str,
    failed_at: Option<Instant>,
    now: Instant,
    resolve_once: bool,
) -> AddressPlan {
    if let Ok(addr) = dial.parse::<SocketAddr>() {
        return AddressPlan::Use(addr);
    }
    let Some(entry) = entry.filter(|e| e.dial == dial) else {
        return AddressPlan::ResolveNow;
    };
    let may = !entry.pending && now.saturating_duration_since(entry.at) >= RESOLVE_REFRESH_MIN;
    match &entry.result {
        Ok(addr) => {
            let failed_since = failed_at.is_some_and(|f| f >= entry.at);
            if may && failed_since && !resolve_once {
                AddressPlan::UseAndRefresh(*addr)
            } else {
                AddressPlan::Use(*addr)
            }
        }
        Err(why) if may => AddressPlan::FailAndRefresh(why.clone()),
        Err(why) => AddressPlan::Fail(why.clone()),
    }
}

/// One peer's last resolution, shared by its links (see the module doc).
#[derive(Debug, Default)]
pub struct AddressCache {
    entry: Arc<Mutex<Option<Resolved>>>,
}

impl AddressCache {
    /// The address to dial `dial` at now, by [`plan`]; starts a refresh
    /// when the plan says so. `Err` says why there is none.
    pub fn address(
        &self,
        dial: &str,
        failed_at: Option<Instant>,
        now: Instant,
        resolve_once: bool,
        resolver: Resolver,
    ) -> Result<SocketAddr, String> {
        let decided = {
            let entry = self.entry.lock().unwrap_or_else(PoisonError::into_inner);
            plan(entry.as_ref(), dial, failed_at, now, resolve_once)
        };
        match decided {
            AddressPlan::Use(addr) => Ok(addr),
            AddressPlan::UseAndRefresh(addr) => {
                self.refresh(dial, resolver);
                Ok(addr)
            }
            AddressPlan::Fail(why) => Err(why),
            AddressPlan::FailAndRefresh(why) => {
                self.refresh(dial, resolver);
                Err(why)
            }
            AddressPlan::ResolveNow => {
                // Outside the lock: another link may resolve it too; the
                // later answer wins, both are fresh.
                let result = resolver(dial);
                self.store(dial, result.clone());
                result
            }
        }
    }

    /// The last resolution, if any (for tests and `/v0/cluster`).
    pub fn last(&self) -> Option<Resolved> {
        self.entry
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn store(&self, dial: &str, result: Result<SocketAddr, String>) {
        *self.entry.lock().unwrap_or_else(PoisonError::into_inner) = Some(Resolved {
            dial: dial.to_string(),
            result,
            at: Instant::now(),
            pending: false,
        });
    }

    /// Marks a refresh pending and resolves on a thread of its own; if no
    /// thread can start, the mark is cleared and the next connect asks again.
    fn refresh(&self, dial: &str, resolver: Resolver) {
        {
            let mut entry = self.entry.lock().unwrap_or_else(PoisonError::into_inner);
            match entry.as_mut() {
                Some(e) if e.dial == dial && !e.pending => e.pending = true,
                _ => return,
            }
        }
        let cache = AddressCache {
            entry: Arc::clone(&self.entry),
        };
        let name = dial.to_string();
        let started = std::thread::Builder::new()
            .name("ataman-resolve".into())
            .spawn(move || {
                let result = resolver(&name);
                cache.store(&name, result);
            });
        if started.is_err()
            && let Some(e) = self
                .entry
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_mut()
        {
            e.pending = false;
        }
    }
}

#[cfg(test)]
#[path = "address_tests.rs"]
mod tests;
