//! The requests a run sends, written straight into a connection's reusable
//! buffer: no allocation per request once the buffer has grown.
//!
//! Ids are unpadded decimals in `1..=keys`, as in the published wrk
//! scripts (`/v0/entity?id=` .. `math.random(1, 10000000)`); values are
//! windows at random offsets of one pool of random bytes per thread.

use super::args::{Distribution, HttpArgs, ValueSize, WorkloadKind};
use super::target::Target;
use super::zipf::Zipf;
use ataman_engine::coding::push_decimal;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes of random data the values are cut from (per thread).
const VALUE_POOL_BYTES: usize = 1024 * 1024;

/// How ids are drawn, shared by the threads of a run.
#[derive(Debug, Clone)]
pub enum KeyDist {
    /// Uniform in `1..=n`.
    Uniform(u64),
    /// Zipfian over `1..=n`.
    Zipf(Arc<Zipf>),
}

impl KeyDist {
    /// The distribution over `1..=n`.
    pub fn new(dist: Distribution, n: u64) -> KeyDist {
        match dist {
            Distribution::Uniform => KeyDist::Uniform(n.max(1)),
            Distribution::Zipf { theta } => KeyDist::Zipf(Arc::new(Zipf::new(n, theta))),
        }
    }

    fn sample(&self, rng: &mut StdRng) -> u64 {
        match self {
            KeyDist::Uniform(n) => rng.random_range(1..=*n),
            KeyDist::Zipf(z) => z.sample(rng),
        }
    }
}

/// What one thread needs to build requests; cheap to clone per thread.
#[derive(Debug, Clone)]
pub struct Plan {
    kind: PlanKind,
    /// Ids of writes, deletes and random reads.
    any_key: KeyDist,
    /// Ids of reads of existing keys.
    existing_key: KeyDist,
    value_size: ValueSize,
    /// The fixed text of requests to each target, by target index.
    targets: Arc<[TargetText]>,
}

/// The parts of a request line and head that depend only on the target.
#[derive(Debug)]
struct TargetText {
    /// `{prefix}/v0/entity?id=`
    path_head: Vec<u8>,
    /// `[&ack=A][&from=F] HTTP/1.1\r\nHost: H\r\n`
    line_tail: Vec<u8>,
}

#[derive(Debug, Clone)]
enum PlanKind {
    Run(WorkloadKind),
    /// PUT ids 1..=n in order, handed out by a shared counter.
    Fill {
        next: Arc<AtomicU64>,
        n: u64,
    },
}

/// HTTP method of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// GET.
    Get,
    /// PUT.
    Put,
    /// DELETE.
    Delete,
}

impl Plan {
    /// The run's workload against `targets` (at least one).
    pub fn run(args: &HttpArgs, targets: &[Target]) -> Plan {
        let existing = if args.fill > 0 { args.fill } else { args.keys };
        Plan {
            kind: PlanKind::Run(args.workload),
            any_key: KeyDist::new(args.distribution, args.keys),
            existing_key: KeyDist::new(args.distribution, existing),
            value_size: args.value_size,
            targets: target_texts(args, targets),
        }
    }

    /// The `--fill` phase against `targets`: PUT ids 1..=n once each.
    pub fn fill(args: &HttpArgs, targets: &[Target]) -> Plan {
        Plan {
            kind: PlanKind::Fill {
                next: Arc::new(AtomicU64::new(1)),
                n: args.fill,
            },
            any_key: KeyDist::Uniform(1),
            existing_key: KeyDist::Uniform(1),
            value_size: args.value_size,
            targets: target_texts(args, targets),
        }
    }

    /// Targets the plan writes requests for.
    pub fn targets(&self) -> usize {
        self.targets.len()
    }

    /// Mixed into the RNG seed, so that with one `--seed` a get-random run
    /// does not replay the ids an earlier put-random run wrote.
    pub fn seed_salt(&self) -> u64 {
        match &self.kind {
            PlanKind::Fill { .. } => 0,
            PlanKind::Run(WorkloadKind::PutRandom) => 1,
            PlanKind::Run(WorkloadKind::GetExisting) => 2,
            PlanKind::Run(WorkloadKind::GetRandom) => 3,
            PlanKind::Run(WorkloadKind::DeleteRandom) => 4,
            PlanKind::Run(WorkloadKind::Mixed { read_percent }) => 5 + u64::from(*read_percent),
        }
    }
}

fn target_texts(args: &HttpArgs, targets: &[Target]) -> Arc<[TargetText]> {
    debug_assert!(!targets.is_empty(), "a plan needs a target");
    targets
        .iter()
        .map(|target| TargetText {
            path_head: format!("{}/v0/entity?id=", target.prefix).into_bytes(),
            line_tail: line_tail(args, target),
        })
        .collect()
}

fn line_tail(args: &HttpArgs, target: &Target) -> Vec<u8> {
    let mut s = String::new();
    if let Some(ack) = args.ack {
        s.push_str(&format!("&ack={ack}"));
    }
    if let Some(from) = args.from {
        s.push_str(&format!("&from={from}"));
    }
    s.push_str(&format!(" HTTP/1.1\r\nHost: {}\r\n", target.host));
    // Checked readable by `run::validate`; a token is sent with every request.
    if let Ok(Some(token)) = args.bearer() {
        s.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    s.into_bytes()
}

/// A thread's request builder.
pub struct Requests {
    plan: Plan,
    rng: StdRng,
    pool: Vec<u8>,
}

impl Requests {
    /// A builder for one thread; `seed` differs per thread.
    pub fn new(plan: Plan, seed: u64) -> Requests {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut pool = vec![0u8; VALUE_POOL_BYTES + plan.value_size.max];
        rng.fill(&mut pool[..]);
        Requests { plan, rng, pool }
    }

    /// Clears `out` and writes the next request to target number `target`
    /// into it; `None` when a finite plan is exhausted. Which request comes
    /// next does not depend on the target.
    pub fn next_into(&mut self, out: &mut Vec<u8>, target: usize) -> Option<Method> {
        let (method, id) = match &self.plan.kind {
            PlanKind::Fill { next, n } => {
                let id = next.fetch_add(1, Ordering::Relaxed);
                if id > *n {
                    return None;
                }
                (Method::Put, id)
            }
            PlanKind::Run(kind) => match *kind {
                WorkloadKind::PutRandom => (Method::Put, self.plan.any_key.sample(&mut self.rng)),
                WorkloadKind::GetRandom => (Method::Get, self.plan.any_key.sample(&mut self.rng)),
                WorkloadKind::DeleteRandom => {
                    (Method::Delete, self.plan.any_key.sample(&mut self.rng))
                }
                WorkloadKind::GetExisting => {
                    (Method::Get, self.plan.existing_key.sample(&mut self.rng))
                }
                WorkloadKind::Mixed { read_percent } => {
                    if self.rng.random_range(0..100u8) < read_percent {
                        (Method::Get, self.plan.existing_key.sample(&mut self.rng))
                    } else {
                        (Method::Put, self.plan.any_key.sample(&mut self.rng))
                    }
                }
            },
        };
        // A plan always has a target (`target_texts`); none would end it.
        let text = self
            .plan
            .targets
            .get(target % self.plan.targets.len().max(1))?;
        out.clear();
        out.extend_from_slice(match method {
            Method::Get => b"GET ",
            Method::Put => b"PUT ",
            Method::Delete => b"DELETE ",
        });
        out.extend_from_slice(&text.path_head);
        push_decimal(out, id);
        out.extend_from_slice(&text.line_tail);
        if method == Method::Put {
            let size = self
                .rng
                .random_range(self.plan.value_size.min..=self.plan.value_size.max);
            out.extend_from_slice(b"Content-Length: ");
            push_decimal(out, size as u64);
            out.extend_from_slice(b"\r\n\r\n");
            let start = self.rng.random_range(0..VALUE_POOL_BYTES);
            out.extend_from_slice(&self.pool[start..start + size]);
        } else {
            out.extend_from_slice(b"\r\n");
        }
        Some(method)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::args::parse_workload;

    fn args(workload: &str) -> (HttpArgs, Vec<Target>) {
        let mut a = HttpArgs::new("http://127.0.0.1:1/p");
        a.workload = parse_workload(workload).unwrap();
        a.keys = 10;
        a.value_size = ValueSize { min: 3, max: 3 };
        a.ack = Some(1);
        let t = vec![Target::parse(&a.url).unwrap()];
        (a, t)
    }

    /// A PUT is a complete HTTP/1.1 request with its body; ids stay in range.
    #[test]
    fn put_request_bytes() {
        let (a, t) = args("put-random");
        let mut r = Requests::new(Plan::run(&a, &t), 1);
        let mut buf = Vec::new();
        for _ in 0..100 {
            assert_eq!(r.next_into(&mut buf, 0), Some(Method::Put));
            let text = String::from_utf8_lossy(&buf).to_string();
            assert!(text.starts_with("PUT /p/v0/entity?id="), "{text}");
            let id: u64 = text["PUT /p/v0/entity?id=".len()..]
                .split('&')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert!((1..=10).contains(&id));
            assert!(
                text.contains("&ack=1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\nContent-Length: 3\r\n\r\n")
            );
            assert_eq!(buf.len(), text.find("\r\n\r\n").unwrap() + 4 + 3);
        }
    }

    /// The fill plan PUTs every id once and then stops.
    #[test]
    fn fill_is_finite() {
        let (mut a, t) = args("get-existing");
        a.fill = 5;
        let mut r = Requests::new(Plan::fill(&a, &t), 1);
        let mut buf = Vec::new();
        let mut n = 0;
        while r.next_into(&mut buf, 0).is_some() {
            n += 1;
        }
        assert_eq!(n, 5);
    }

    /// Each target gets its own Host and prefix; the ids drawn do not
    /// depend on the target (one target behaves as before).
    #[test]
    fn requests_per_target() {
        let (a, _) = args("get-random");
        let targets =
            crate::http::target::parse_targets("http://127.0.0.1:1/p,http://127.0.0.1:2/q")
                .unwrap();
        let mut two = Requests::new(Plan::run(&a, &targets), 1);
        let mut one = Requests::new(Plan::run(&a, &targets[..1]), 1);
        let (mut buf, mut single) = (Vec::new(), Vec::new());
        for i in 0..10 {
            two.next_into(&mut buf, i);
            one.next_into(&mut single, 0);
            let text = String::from_utf8(buf.clone()).unwrap();
            let id = |t: &str| {
                t.split("id=")
                    .nth(1)
                    .unwrap()
                    .split('&')
                    .next()
                    .unwrap()
                    .to_string()
            };
            let single = String::from_utf8(single.clone()).unwrap();
            assert_eq!(id(&text), id(&single));
            if i % 2 == 0 {
                assert!(text.starts_with("GET /p/v0/entity?id="), "{text}");
                assert!(text.contains("\r\nHost: 127.0.0.1:1\r\n"), "{text}");
                assert_eq!(text, single);
            } else {
                assert!(text.starts_with("GET /q/v0/entity?id="), "{text}");
                assert!(text.contains("\r\nHost: 127.0.0.1:2\r\n"), "{text}");
            }
        }
    }

    /// Decimals are written without padding.
    #[test]
    fn decimals() {
        let mut v = Vec::new();
        push_decimal(&mut v, 0);
        push_decimal(&mut v, 10_000_000);
        push_decimal(&mut v, u64::MAX);
        assert_eq!(v, b"01000000018446744073709551615");
    }
}
