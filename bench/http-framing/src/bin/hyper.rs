//! HTTP/1.1 server on `hyper` 1.x + tokio, for the framing benchmark.
//!
//! Behaviour (same as the `mio-httparse` binary):
//! - `GET /v0/entity?id=K`  -> 200 with a fixed 16-byte body;
//! - `PUT /v0/entity?id=K`  -> reads the Content-Length body, 201 with an empty body;
//! - keep-alive, `pipeline_flush` on.
//!
//! Layout: `--threads 1` runs a current-thread runtime (everything on one thread, the
//! cheapest tokio set-up for one network thread); `--threads N>1` (or `--flavor multi`)
//! runs a multi-thread runtime with N workers (work stealing).
//!
//! `--tx` models the node's write path: a PUT pushes a oneshot sender into the queue of
//! one "transaction" std thread (the same queue type as the mio server, but one push per
//! request: each request is its own task); tx drains everything queued in one wake-up
//! and completes the oneshots, which wakes the connection tasks through tokio's waker
//! (a remote wake-up of the runtime thread per completed request).
//!
//! `--tx --tx-batch` batches both ways, as the mio server does: a PUT appends its oneshot
//! to a runtime-side outbox and wakes (only on empty -> non-empty, a local wake-up) a
//! flusher task, which runs after the tasks already queued in this tick and moves the
//! whole outbox into tx's queue in one push. On the way back tx appends its whole batch
//! of completions to one queue and wakes one dispatcher task on the runtime (tokio
//! `Notify`, only on empty -> non-empty); the dispatcher completes the oneshots from
//! inside the runtime, so waking the connection tasks is local.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full, Limited};
use http_framing_bench::TxQueue;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::sync::{Notify, oneshot};

const BODY: &[u8; 16] = b"0123456789abcdef";
const MAX_BODY: u64 = 1024 * 1024;

struct Args {
    addr: SocketAddr,
    threads: usize,
    multi: bool,
    tx: bool,
    tx_batch: bool,
}

fn parse_args() -> Args {
    let mut args = Args { addr: "127.0.0.1:8080".parse().unwrap(), threads: 1, multi: false, tx: false, tx_batch: false };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--addr" => args.addr = it.next().expect("--addr ADDR").parse().expect("bad --addr"),
            "--threads" => args.threads = it.next().expect("--threads N").parse().expect("bad --threads"),
            "--flavor" => match it.next().as_deref() {
                Some("multi") => args.multi = true,
                Some("current") => args.multi = false,
                _ => panic!("--flavor current|multi"),
            },
            "--tx" => args.tx = true,
            "--tx-batch" => args.tx_batch = true,
            _ => {
                eprintln!(
                    "usage: hyper [--addr 127.0.0.1:PORT] [--threads N] [--flavor current|multi] [--tx [--tx-batch]]"
                );
                std::process::exit(2);
            }
        }
    }
    assert!(args.addr.ip().is_loopback(), "this benchmark server binds loopback only");
    assert!(args.threads >= 1);
    if args.threads > 1 {
        args.multi = true;
    }
    args
}

type Done = oneshot::Sender<()>;

/// How a PUT reaches tx.
#[derive(Clone)]
enum TxPath {
    /// One push into tx's queue per request.
    Direct(Arc<TxQueue<Done>>),
    /// Into the runtime-side outbox; the flusher task pushes it to tx in batches.
    Batched(Arc<Handoff>),
}

fn main() {
    let args = parse_args();
    let rt = if args.multi {
        tokio::runtime::Builder::new_multi_thread().worker_threads(args.threads).enable_io().build()
    } else {
        tokio::runtime::Builder::new_current_thread().enable_io().build()
    }
    .expect("runtime");

    let outbox = Arc::new(Handoff::default());
    let completions = Arc::new(Handoff::default());
    let (tx, batch_tasks) = match (args.tx, args.tx_batch) {
        (false, _) => (None, None),
        (true, false) => {
            // The stand-in transaction thread completes every drained request itself.
            let q = TxQueue::spawn("tx", |batch: &mut Vec<Done>| {
                for done in batch.drain(..) {
                    let _ = done.send(());
                }
            });
            (Some(TxPath::Direct(q)), None)
        }
        (true, true) => {
            // The stand-in transaction thread hands its whole batch back in one push.
            let back = completions.clone();
            let q = TxQueue::spawn("tx", move |batch: &mut Vec<Done>| back.push_all(batch));
            (Some(TxPath::Batched(outbox.clone())), Some((q, outbox, completions)))
        }
    };

    let flavor = if args.multi { "multi_thread" } else { "current_thread" };
    rt.block_on(async move {
        if let Some((q, outbox, completions)) = batch_tasks {
            // Flusher: the PUTs of this tick go to tx in one push.
            tokio::spawn(async move {
                let mut batch = Vec::new();
                loop {
                    outbox.notify.notified().await;
                    std::mem::swap(&mut *outbox.items.lock().unwrap(), &mut batch);
                    q.push_all(&mut batch);
                }
            });
            // Dispatcher: tx's completions are completed from inside the runtime.
            tokio::spawn(async move {
                let mut batch = Vec::new();
                loop {
                    completions.notify.notified().await;
                    std::mem::swap(&mut *completions.items.lock().unwrap(), &mut batch);
                    for done in batch.drain(..) {
                        let _ = done.send(());
                    }
                }
            });
        }
        let listener = tokio::net::TcpListener::bind(args.addr).await.expect("bind");
        eprintln!(
            "hyper listening on {} ({flavor}, {} worker(s)), tx={} tx_batch={}",
            args.addr, args.threads, args.tx, args.tx_batch
        );
        // Accept inside a spawned task so that, on the multi-thread runtime, it runs on a
        // worker like everything else (block_on itself runs on the main thread).
        let acceptor = tokio::spawn(async move {
            loop {
                let (stream, _) = match listener.accept().await {
                    Ok(s) => s,
                    Err(e) => {
                        eprintln!("accept: {e}");
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let tx = tx.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req| handle(req, tx.clone()));
                    let _ = http1::Builder::new()
                        .keep_alive(true)
                        .pipeline_flush(true)
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        acceptor.await.expect("acceptor");
    });
}

/// `--tx-batch`: a queue plus a task wake-up on empty -> non-empty (outbox to the flusher,
/// completions to the dispatcher).
#[derive(Default)]
struct Handoff {
    items: Mutex<Vec<Done>>,
    notify: Notify,
}

impl Handoff {
    fn push(&self, done: Done) {
        let was_empty = {
            let mut items = self.items.lock().unwrap();
            let was_empty = items.is_empty();
            items.push(done);
            was_empty
        };
        if was_empty {
            self.notify.notify_one();
        }
    }

    fn push_all(&self, batch: &mut Vec<Done>) {
        let was_empty = {
            let mut items = self.items.lock().unwrap();
            let was_empty = items.is_empty();
            items.append(batch);
            was_empty
        };
        if was_empty {
            self.notify.notify_one();
        }
    }
}

fn empty(code: StatusCode) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = code;
    r
}

async fn handle(req: Request<Incoming>, tx: Option<TxPath>) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.uri().path() != "/v0/entity" {
        return Ok(empty(StatusCode::NOT_FOUND));
    }
    let has_id = req
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv.strip_prefix("id=").is_some_and(|v| !v.is_empty())));
    if !has_id {
        return Ok(empty(StatusCode::BAD_REQUEST));
    }
    match *req.method() {
        Method::GET => Ok(Response::new(Full::new(Bytes::from_static(BODY)))),
        Method::PUT => {
            if hyper::body::Body::size_hint(req.body()).upper().is_some_and(|n| n > MAX_BODY) {
                return Ok(empty(StatusCode::PAYLOAD_TOO_LARGE));
            }
            // A real node would copy the body into the write; here it is just read.
            let _body = match Limited::new(req.into_body(), MAX_BODY as usize).collect().await {
                Ok(c) => c.to_bytes(),
                Err(_) => return Ok(empty(StatusCode::BAD_REQUEST)),
            };
            if let Some(tx) = tx {
                let (done, wait) = oneshot::channel();
                match tx {
                    TxPath::Direct(q) => q.push(done),
                    TxPath::Batched(outbox) => outbox.push(done),
                }
                if wait.await.is_err() {
                    return Ok(empty(StatusCode::SERVICE_UNAVAILABLE));
                }
            }
            Ok(empty(StatusCode::CREATED))
        }
        _ => Ok(empty(StatusCode::METHOD_NOT_ALLOWED)),
    }
}
