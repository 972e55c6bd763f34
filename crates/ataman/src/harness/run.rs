//! One run of the harness, start to report: start the cluster; run the
//! clients and the fault schedule for the duration; stop the clients; heal
//! everything; converge; read every key; stop the nodes (each must exit
//! 0); check the history; report.

use super::cas::workload::{self as cas_workload, CasSpec};
use super::cluster::{Cluster, ClusterSpec, ClusterView};
use super::collected::Meter;
use super::faults::{self, Injector};
use super::history::{self, Crash, OpKind, Recorder, Workload};
use super::report::Report;
use super::workload::{self, ClientSpec};
use super::{Config, HarnessError, checker, converge};
use ataman_testkit::lock::lock;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Extra time a client waits for an answer beyond the replication timeout
/// (a paused node answers after it resumes: pauses last up to 2 s).
pub const REQUEST_MARGIN_MS: u64 = 3_000;
/// Bound on joining the client threads after the run (each request is
/// bounded by the client timeout, so they end sooner).
pub const CLIENT_JOIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Set by SIGINT or SIGTERM in `ataman test-cluster`: the faults stop at
/// once, everything is healed and the nodes stopped, nothing is checked.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// True once the run was interrupted.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// A fresh directory for a run under the system's temporary directory.
fn temp_run_dir(seed: u64) -> Result<PathBuf, HarnessError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = std::env::temp_dir().join(format!(
        "ataman-test-cluster-{}-{seed}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).map_err(|source| HarnessError::Io {
        what: format!("create {}", dir.display()),
        source,
    })?;
    Ok(dir)
}

/// Carries out one run and checks it. `Err` only when the run could not
/// be carried out; violations are in the report.
pub fn run(config: &Config) -> Result<Report, HarnessError> {
    config.validate()?;
    let run_started = Instant::now();
    let (dir, temporary) = match &config.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|source| HarnessError::Io {
                what: format!("create {}", dir.display()),
                source,
            })?;
            (dir.clone(), false)
        }
        None => (temp_run_dir(config.seed)?, true),
    };
    let serve_args = node_args(config);
    let cas = config.workloads.contains(&Workload::Cas);
    let cluster = Mutex::new(Cluster::start(ClusterSpec {
        exe: config.exe.clone(),
        dir: dir.clone(),
        nodes: config.nodes,
        spares: config.spares,
        serve_args,
        sync_delay_ms: config.sync_delay_ms,
        resp: cas,
    })?);
    let view = lock(&cluster).view();
    let recorder = Arc::new(Recorder::new());
    let duration_ms = config.duration.as_millis() as u64;
    let shape = config.shape();
    let steps = faults::schedule_shaped(config.seed, shape, duration_ms, &config.faults);
    let timeout = Duration::from_millis(config.replication_timeout_ms + REQUEST_MARGIN_MS);
    let spec = ClientSpec {
        seed: config.seed,
        workloads: config.workloads.clone(),
        ack_w: config.ack_w,
        ack_r: config.ack_r,
        from: config.from,
        rate_per_client: config.rate_per_client,
        timeout,
        value_bytes: config.value_bytes,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let deadline = started + config.duration;
    let handles = start_clients(config, &spec, (&view, &recorder), &stop, deadline)?;
    let meter = Meter::start(&view).map_err(|source| HarnessError::Io {
        what: "start the collection meter thread".into(),
        source,
    })?;
    let injector = Injector::with_min_members(&cluster, &recorder, shape.min_members);
    injector.record_node_ids();
    let left = injector.run(&steps, started, deadline);
    // The clients stop at the deadline by themselves; each request is bounded.
    let join_deadline = Instant::now() + CLIENT_JOIN_TIMEOUT;
    stop.store(true, Ordering::Relaxed);
    for handle in handles {
        while !handle.is_finished() && Instant::now() < join_deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if handle.is_finished() {
            let _ = handle.join();
        }
    }
    injector.heal_all(left)?;
    let membership = (config.spares > 0 || config.faults.iter().any(|k| k.is_membership()))
        .then(|| injector.finish_membership());
    drop(injector);
    let mut cluster = cluster.into_inner().unwrap_or_else(PoisonError::into_inner);
    if interrupted() {
        cluster.stop_all();
        drop(cluster);
        if temporary && !config.keep_dir {
            let _ = std::fs::remove_dir_all(&dir);
        }
        return Err(HarnessError::Interrupted);
    }
    let healed = Instant::now();
    // Every key written (even by a write that may have failed) and its
    // replicas: the top max(from, R) nodes (anti-entropy keeps R copies).
    let factor = config.replication_factor.unwrap_or(config.nodes) as u32;
    // Placement over the final members (slots), as the nodes place keys.
    let members = cluster.member_slots();
    let member_urls: Vec<String> = members.iter().map(|&i| view.urls()[i].clone()).collect();
    let mut keys: BTreeMap<String, (Workload, u32)> = BTreeMap::new();
    recorder.with_ops(|ops| {
        for op in ops.iter().filter(|o| o.kind != OpKind::Get) {
            let entry = keys.entry(op.key.clone()).or_insert((op.workload, factor));
            entry.1 = entry.1.max(op.from);
        }
    });
    let replicas: Vec<converge::KeyReplicas> = keys
        .iter()
        .map(|(key, (_, from))| converge::KeyReplicas {
            key: key.clone(),
            replicas: ataman_node::cluster::placement::replicas(
                &member_urls,
                key.as_bytes(),
                *from as usize,
            )
            .into_iter()
            .map(|r| members[r])
            .collect(),
        })
        .collect();
    let (mut convergence, copies) = converge::converge(
        &view,
        &members,
        &replicas,
        &recorder,
        healed,
        config.converge_timeout,
    );
    if let Some(membership) = membership {
        convergence.repair = format!("{membership}; {}", convergence.repair);
    }
    let final_keys: Vec<(String, Workload)> =
        keys.iter().map(|(k, (w, _))| (k.clone(), *w)).collect();
    workload::final_reads(
        &final_keys,
        &view,
        &recorder,
        config.from,
        config.from,
        timeout,
        config.value_bytes,
        config.clients,
        config.clients,
    );
    if cas {
        cas_workload::final_reads(&view, &recorder, timeout, config.clients);
    }
    let collected = meter.finish();
    convergence.collected_tombstones = collected.tombstones;
    convergence.collected_expired = collected.expired;
    for (node, status) in cluster.poll_exits() {
        recorder.crash(Crash {
            node,
            at_us: recorder.now_us(),
            status: format!("exited on its own: {status}"),
        });
    }
    for (node, status) in cluster.stop_all() {
        recorder.crash(Crash {
            node,
            at_us: recorder.now_us(),
            status: format!("unclean stop: {status}"),
        });
    }
    let mut history = recorder.finish(config.meta(view.urls().to_vec()));
    history.copies = copies;
    history.convergence = Some(convergence);
    let findings = checker::check(&history);
    let history_path = config
        .history
        .clone()
        .unwrap_or_else(|| dir.join("history.jsonl"));
    let written = write_history(&history, &history_path);
    let mut report = Report {
        history,
        findings,
        history_path: written.then_some(history_path),
        elapsed_s: run_started.elapsed().as_secs_f64(),
    };
    if let Some(path) = &config.report {
        report.write(path).map_err(|source| HarnessError::Io {
            what: format!("write {}", path.display()),
            source,
        })?;
    }
    drop(cluster);
    if temporary && !config.keep_dir && report.passed() {
        let _ = std::fs::remove_dir_all(&dir);
        if config.history.is_none() {
            report.history_path = None;
        }
    }
    Ok(report)
}

/// Starts the HTTP workloads' clients (if any is mixed) and the `cas`
/// workload's (if mixed), `config.clients` each.
fn start_clients(
    config: &Config,
    spec: &ClientSpec,
    (view, recorder): (&Arc<ClusterView>, &Arc<Recorder>),
    stop: &Arc<AtomicBool>,
    deadline: Instant,
) -> Result<Vec<std::thread::JoinHandle<()>>, HarnessError> {
    let io = |what: &str| {
        let what = what.to_owned();
        move |source| HarnessError::Io { what, source }
    };
    let http = config.workloads.iter().any(|w| *w != Workload::Cas);
    let http_clients = if http { config.clients } else { 0 };
    let mut handles = workload::start_clients(http_clients, spec, view, recorder, stop, deadline)
        .map_err(io("start the client threads"))?;
    if config.workloads.contains(&Workload::Cas) {
        let cas_spec = CasSpec {
            seed: config.seed,
            rate_per_client: config.rate_per_client,
            timeout: spec.timeout,
        };
        let more =
            cas_workload::start_clients(config.clients, &cas_spec, view, recorder, stop, deadline)
                .map_err(io("start the cas client threads"))?;
        handles.extend(more);
    }
    Ok(handles)
}

/// Every node's `ataman serve` arguments: the run's, then `-- ARGS`.
fn node_args(config: &Config) -> Vec<String> {
    let mut serve_args = vec![
        "--replication-timeout-ms".to_string(),
        config.replication_timeout_ms.to_string(),
        "--anti-entropy-interval-ms".to_string(),
        config.anti_entropy_interval_ms.to_string(),
    ];
    // The harness's grace and memtable unless `-- ARGS` give their own
    // (a node refuses an option given twice).
    for (option, value) in [
        ("--tombstone-grace-ms", config.grace_ms().to_string()),
        (
            "--memtable-bytes-max",
            config.memtable_bytes_max.to_string(),
        ),
    ] {
        if !config
            .serve_args
            .iter()
            .any(|a| a.split('=').next() == Some(option))
        {
            serve_args.extend([option.to_string(), value]);
        }
    }
    if let Some(r) = config.replication_factor {
        serve_args.extend(["--replication-factor".to_string(), r.to_string()]);
    }
    if let Some(bug) = &config.planted_bug {
        serve_args.extend(["--debug-planted-bug".to_string(), bug.clone()]);
    }
    serve_args.extend(config.serve_args.iter().cloned());
    serve_args
}

fn write_history(history: &history::History, path: &std::path::Path) -> bool {
    let file = match std::fs::File::create(path) {
        Ok(f) => f,
        Err(e) => {
            tracing::error!(file = %path.display(), error = %e, "test-cluster: cannot write the history");
            return false;
        }
    };
    let mut out = std::io::BufWriter::new(file);
    match history
        .write_jsonl(&mut out)
        .and_then(|()| std::io::Write::flush(&mut out))
    {
        Ok(()) => true,
        Err(e) => {
            tracing::error!(file = %path.display(), error = %e, "test-cluster: cannot write the history");
            false
        }
    }
}
