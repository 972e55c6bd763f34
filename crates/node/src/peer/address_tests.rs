use super::*;
use std::sync::atomic::{AtomicU16, Ordering};

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn resolved(dial: &str, result: Result<SocketAddr, String>, at: Instant) -> Resolved {
    Resolved {
        dial: dial.into(),
        result,
        at,
        pending: false,
    }
}

const NAME: &str = "ataman-2:19234";

// An IP literal is dialed as it is: nothing to resolve, whatever failed.
#[test]
fn an_ip_literal_is_never_resolved() {
    let now = Instant::now();
    let p = plan(None, "10.0.0.7:19234", Some(now), now, false);
    assert_eq!(p, AddressPlan::Use(addr("10.0.0.7:19234")));
}

// A name never resolved, or resolved for another dial string (the node
// table's slot renamed), is resolved now.
#[test]
fn a_name_not_resolved_yet_is_resolved_now() {
    let now = Instant::now();
    assert_eq!(plan(None, NAME, None, now, false), AddressPlan::ResolveNow);
    let other = resolved("ataman-9:19234", Ok(addr("10.0.0.9:1")), now);
    assert_eq!(
        plan(Some(&other), NAME, None, now, false),
        AddressPlan::ResolveNow
    );
}

// The regression of issue 35: a link that failed after the name was
// resolved asks for a fresh answer (a container that came back at another
// address), once the refresh interval passed; a link that did not fail keeps
// its address.
#[test]
fn a_failure_after_the_resolution_asks_again() {
    let t0 = Instant::now();
    let old = addr("10.0.0.2:19234");
    let e = resolved(NAME, Ok(old), t0);
    let later = t0 + RESOLVE_REFRESH_MIN;
    assert_eq!(
        plan(Some(&e), NAME, None, later, false),
        AddressPlan::Use(old)
    );
    assert_eq!(
        plan(Some(&e), NAME, Some(later), later, false),
        AddressPlan::UseAndRefresh(old)
    );
    // The old behaviour (resolved once) never asks again: the negative control.
    assert_eq!(
        plan(Some(&e), NAME, Some(later), later, true),
        AddressPlan::Use(old)
    );
}

// A failure before the resolution was answered by it already.
#[test]
fn a_failure_before_the_resolution_does_not_ask_again() {
    let t0 = Instant::now();
    let e = resolved(
        NAME,
        Ok(addr("10.0.0.2:19234")),
        t0 + Duration::from_millis(1),
    );
    let later = t0 + RESOLVE_REFRESH_MIN * 2;
    assert_eq!(
        plan(Some(&e), NAME, Some(t0), later, false),
        AddressPlan::Use(addr("10.0.0.2:19234"))
    );
}

// Bounded: not twice within the refresh interval, not while one is under way.
#[test]
fn refreshes_are_bounded() {
    let t0 = Instant::now();
    let old = addr("10.0.0.2:19234");
    let mut e = resolved(NAME, Ok(old), t0);
    let soon = t0 + RESOLVE_REFRESH_MIN - Duration::from_millis(1);
    assert_eq!(
        plan(Some(&e), NAME, Some(soon), soon, false),
        AddressPlan::Use(old)
    );
    e.pending = true;
    let later = t0 + RESOLVE_REFRESH_MIN * 4;
    assert_eq!(
        plan(Some(&e), NAME, Some(later), later, false),
        AddressPlan::Use(old)
    );
}

// A name that did not resolve is asked again (at the same bound) whether or
// not a link failed since: the container may not have started yet.
#[test]
fn an_unresolved_name_is_asked_again() {
    let t0 = Instant::now();
    let e = resolved(NAME, Err("cannot resolve".into()), t0);
    let soon = t0 + Duration::from_millis(1);
    assert_eq!(
        plan(Some(&e), NAME, None, soon, false),
        AddressPlan::Fail("cannot resolve".into())
    );
    let later = t0 + RESOLVE_REFRESH_MIN;
    assert_eq!(
        plan(Some(&e), NAME, None, later, true),
        AddressPlan::FailAndRefresh("cannot resolve".into())
    );
}

/// The port the fake resolver answers with (the "container's address").
static FAKE_PORT: AtomicU16 = AtomicU16::new(1);

fn fake_resolver(_dial: &str) -> Result<SocketAddr, String> {
    Ok(SocketAddr::from((
        [10, 0, 0, 2],
        FAKE_PORT.load(Ordering::SeqCst),
    )))
}

// The cache end to end with the resolver seam: the first connect resolves
// on the caller's thread; after the peer "moved" and the link failed, a
// connect still gets the old address at once (nothing blocks) and the
// refresh thread stores the new one, which a later connect gets.
#[test]
fn the_cache_follows_a_moved_peer_after_a_failure() {
    let cache = AddressCache::default();
    FAKE_PORT.store(1, Ordering::SeqCst);
    let t0 = Instant::now();
    let first = cache.address(NAME, None, t0, false, fake_resolver).unwrap();
    assert_eq!(first.port(), 1);
    FAKE_PORT.store(2, Ordering::SeqCst);
    // No failure yet: the cached address, no refresh.
    let again = cache
        .address(NAME, None, Instant::now(), false, fake_resolver)
        .unwrap();
    assert_eq!(again.port(), 1);
    assert!(!cache.last().unwrap().pending);
    let failed = cache.last().unwrap().at + RESOLVE_REFRESH_MIN;
    let during = cache
        .address(NAME, Some(failed), failed, false, fake_resolver)
        .unwrap();
    assert_eq!(
        during.port(),
        1,
        "the connect goes on with the address it has"
    );
    let mut port = 0;
    for _ in 0..2_000 {
        let last = cache.last().unwrap();
        if !last.pending {
            port = last.result.unwrap().port();
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(port, 2, "the refresh stored the new address");
    let after = cache
        .address(NAME, Some(failed), Instant::now(), false, fake_resolver)
        .unwrap();
    assert_eq!(after.port(), 2);
}
