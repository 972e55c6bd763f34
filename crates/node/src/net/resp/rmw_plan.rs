//! The RESP command table's read-modify-write commands (`INCR` …,
//! `SET … NX|XX|GET`): each becomes one protocol-neutral
//! [`Update`] of its key ([`Plan::Rmw`]), parsed by the pure rules of
//! [`super::rmw`], with the expiry rule Redis gives it.

use super::encode::Reply;
use super::expiry::{Chain, SetExpiry, Then, set_options};
use super::rmw::Rmw;
use super::table::{Limits, Plan, check_key, check_value};
use crate::net::rmw_local::{Op, Ttl, Update};
use std::borrow::Cow;

/// `INCR`, `APPEND`, `GETSET`, … (`name` as the table names it): the key
/// and every argument within their bounds, then the update.
pub fn update<'b>(
    name: &'static str,
    args: &[Cow<'_, [u8]>],
    limits: Limits,
    ack: u32,
    from: u32,
) -> Result<Plan<'b>, Reply> {
    check_key(&args[1], limits)?;
    for arg in &args[2..] {
        check_value(arg, limits)?;
    }
    let owned: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
    let Some((key, op)) = super::rmw::parse(&owned)? else {
        return Err(Reply::err("internal error: not a read-modify-write"));
    };
    let ttl = Update::ttl_of(&op);
    let update = Update {
        key,
        op: Op::Value(op),
        ttl,
        ack,
        from,
        steps: Vec::new(),
        watch: None,
    };
    Ok(Plan::Rmw(name, Box::new(update)))
}

/// `SET key value [NX|XX] [GET] [EX|PX|EXAT|PXAT n|KEEPTTL]`: the
/// conditions parsed by [`super::rmw::parse`], the expiry by `SET`'s own
/// options.
pub fn set<'b>(
    args: &[Cow<'_, [u8]>],
    limits: Limits,
    ack: u32,
    from: u32,
) -> Result<Plan<'b>, Reply> {
    let (expiry, conditions) = set_options(&args[3..])?;
    let ttl = match expiry {
        SetExpiry::To(expiry) => Ttl::Set(expiry),
        SetExpiry::Keep => Ttl::Keep,
    };
    check_key(&args[1], limits)?;
    check_value(&args[2], limits)?;
    let mut owned: Vec<Vec<u8>> = args[..3].iter().map(|a| a.to_vec()).collect();
    owned.extend(conditions);
    let Some((key, op)) = super::rmw::parse(&owned)? else {
        return Err(Reply::err("internal error: not a read-modify-write"));
    };
    let update = Update {
        key,
        op: Op::Value(op),
        ttl,
        ack,
        from,
        steps: Vec::new(),
        watch: None,
    };
    Ok(Plan::Rmw("set", Box::new(update)))
}

/// A read-then-write expiry command ([`Chain`]) as one atomic update of
/// its key, for a key whose only replica is this node: `EXPIRE` and its
/// kin, `PERSIST`, `GETEX` decide from the value and deadline the update
/// reads ([`super::expiry::follow`]); `SET key value KEEPTTL` is a `SET`
/// that keeps the deadline.
pub fn atomic(chain: Chain) -> Update {
    let (op, ttl) = match chain.then {
        Then::KeepTtl(value) => {
            let set = Rmw::Set {
                value,
                if_absent: None,
                get: false,
            };
            (Op::Value(set), Ttl::Keep)
        }
        Then::Read(op) => (Op::Value(op), Ttl::Keep),
        then => (Op::Expiry(then), Ttl::Keep),
    };
    Update {
        key: chain.key,
        op,
        ttl,
        ack: chain.ack,
        from: chain.from,
        steps: Vec::new(),
        watch: None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::table::{Limits, Plan, Session, plan};
    use super::Reply;
    use crate::net::resp::test_args as args;
    use std::borrow::Cow;

    const LIMITS: Limits = Limits {
        key_bytes_max: 8,
        value_bytes_max: 16,
        cluster_size: 3,
        from_default: 3,
    };

    fn planned(words: &[&str]) -> Plan<'static> {
        let a: &'static [Cow<'static, [u8]>] = Box::leak(args(words).into_boxed_slice());
        plan(a, &mut Session::new(7), LIMITS).1
    }

    fn error_of(p: Plan<'_>) -> String {
        match p {
            Plan::Reply(Reply::Error(e)) => e,
            other => panic!("not an error: {other:?}"),
        }
    }

    /// The read-modify-write commands become one update of their key,
    /// with the expiry rule Redis gives each (`INCR` keeps the deadline,
    /// `SET … NX PX` sets one, `GETSET` drops it).
    #[test]
    fn read_modify_writes_plan_one_update_of_their_key() {
        use crate::net::resp::rmw::Rmw;
        use crate::net::rmw_local::{Op, Ttl};
        use crate::ttl::Expiry;
        let update = |words: &[&str]| match planned(words) {
            Plan::Rmw(_, u) => *u,
            other => panic!("{words:?}: not an update: {other:?}"),
        };
        let incr = update(&["INCR", "k"]);
        assert_eq!(
            (incr.key.as_slice(), &incr.op),
            (&b"k"[..], &Op::Value(Rmw::IncrBy(1)))
        );
        assert_eq!(incr.ttl, Ttl::Keep);
        assert_eq!((incr.ack, incr.from), (2, 3));
        let lock = update(&["set", "k", "v", "px", "100", "nx"]);
        assert_eq!(lock.ttl, Ttl::Set(Expiry::AfterMs(100)));
        assert!(matches!(
            lock.op,
            Op::Value(Rmw::Set {
                if_absent: Some(true),
                get: false,
                ..
            })
        ));
        assert_eq!(update(&["getset", "k", "v"]).ttl, Ttl::Set(Expiry::Never));
        assert_eq!(update(&["set", "k", "v", "XX", "KEEPTTL"]).ttl, Ttl::Keep);
        assert!(
            error_of(planned(&["append", "k", "01234567890123456"])).contains("--value-bytes-max")
        );
    }

    /// A read-then-write expiry command becomes one atomic update of its
    /// key: the expiry step as the op, `SET … KEEPTTL` as a `SET` that
    /// keeps the deadline; key and replication unchanged.
    #[test]
    fn expiry_chains_become_atomic_updates() {
        use super::super::expiry::{Chain, Condition, Then};
        use super::atomic;
        use crate::net::resp::rmw::Rmw;
        use crate::net::rmw_local::{Op, Ttl};
        use crate::ttl::Expiry;
        let chain = |then| Chain {
            name: "expire",
            key: b"k".to_vec(),
            ack: 2,
            from: 3,
            then,
        };
        let expire = Then::Expire(Some(Expiry::AfterMs(5)), Condition::Gt);
        let update = atomic(chain(expire.clone()));
        assert_eq!(update.op, Op::Expiry(expire));
        assert_eq!(
            (update.key.as_slice(), update.ack, update.from),
            (&b"k"[..], 2, 3)
        );
        assert_eq!(atomic(chain(Then::Persist)).op, Op::Expiry(Then::Persist));
        let keep = atomic(chain(Then::KeepTtl(b"v".to_vec())));
        assert_eq!(
            keep.op,
            Op::Value(Rmw::Set {
                value: b"v".to_vec(),
                if_absent: None,
                get: false
            })
        );
        assert_eq!(keep.ttl, Ttl::Keep);
    }
}
