//! The requests behind `ataman ctl layout …` (the texts are
//! [`super::layout`]'s).

use super::layout::{self, LayoutCommand, PlanTotals};
use super::{CtlError, expect_status, write_out};
use crate::http_client::exchange::exchange;
use crate::http_client::url::{BaseUrl, target};
use std::io::Write;
use std::time::{Duration, Instant};

/// `wait`: bound on the whole wait when `--timeout-ms` is not given.
pub const WAIT_TIMEOUT_MS_DEFAULT: u64 = 600_000;
/// `wait`: time between two polls of `GET /v0/layout`.
const WAIT_POLL_INTERVAL: Duration = Duration::from_millis(500);

/// Runs `command` against the node at `url`; `timeout` bounds each
/// exchange, `total` the whole `wait`.
pub(super) fn run(
    url: &BaseUrl,
    command: &LayoutCommand,
    timeout: Duration,
    total: Option<Duration>,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    match command {
        LayoutCommand::Show => {
            let doc = get_layout(url, timeout)?;
            let text = layout::show_text(&doc).map_err(CtlError::Format)?;
            write_out(out, text.as_bytes())
        }
        LayoutCommand::Apply { change, version } => {
            if change.is_empty() && change.dead.is_empty() {
                return Err(CtlError::Usage(
                    "apply needs --add, --remove, --replication-factor or --dead".into(),
                ));
            }
            let version = version.to_string().into_bytes();
            let mut query = vec![("version", version)];
            query.extend(change.query());
            let pairs: Vec<(&str, &[u8])> = query.iter().map(|(k, v)| (*k, &v[..])).collect();
            let response = exchange(
                url,
                "POST",
                &target("/v0/layout", &pairs),
                Some(&[]),
                timeout,
            )?;
            expect_status(&response, 200)?;
            let doc: serde_json::Value = serde_json::from_slice(&response.body)
                .map_err(|e| CtlError::Format(format!("POST /v0/layout: {e}")))?;
            let text = layout::show_text(&doc).map_err(CtlError::Format)?;
            write_out(out, text.as_bytes())
        }
        LayoutCommand::Plan { change } => {
            if change.is_empty() {
                return Err(CtlError::Usage(
                    "plan needs --add, --remove or --replication-factor".into(),
                ));
            }
            plan(url, change, timeout, out)
        }
        LayoutCommand::Wait => {
            let total = total.unwrap_or(Duration::from_millis(WAIT_TIMEOUT_MS_DEFAULT));
            wait(url, timeout, total, out)
        }
    }
}

fn get_layout(url: &BaseUrl, timeout: Duration) -> Result<serde_json::Value, CtlError> {
    let response = exchange(url, "GET", "/v0/layout", None, timeout)?;
    expect_status(&response, 200)?;
    serde_json::from_slice(&response.body)
        .map_err(|e| CtlError::Format(format!("GET /v0/layout: {e}")))
}

/// Asks every member of the node's layout for its sends and prints the sums.
fn plan(
    url: &BaseUrl,
    change: &layout::ChangeArgs,
    timeout: Duration,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    let doc = get_layout(url, timeout)?;
    let members = layout::members(&doc).map_err(CtlError::Format)?;
    let query = change.query();
    let pairs: Vec<(&str, &[u8])> = query.iter().map(|(k, v)| (*k, &v[..])).collect();
    let path = target("/v0/layout/plan", &pairs);
    let mut totals = PlanTotals::new();
    for member in &members {
        let member_url = BaseUrl::parse(member)
            .map_err(|e| CtlError::Format(format!("member {member}: {e}")))?;
        let response = exchange(&member_url, "GET", &path, None, timeout)?;
        expect_status(&response, 200)?;
        let doc: serde_json::Value = serde_json::from_slice(&response.body)
            .map_err(|e| CtlError::Format(format!("{member} /v0/layout/plan: {e}")))?;
        layout::add_plan(&mut totals, member, &doc)
            .map_err(|e| CtlError::Format(format!("{member}: {e}")))?;
    }
    write_out(out, layout::plan_text(&totals).as_bytes())
}

/// `doc` and the layout document of every other member it lists that
/// answers (a member that does not is left out of the sums).
fn with_members(doc: serde_json::Value, timeout: Duration) -> Vec<serde_json::Value> {
    let me = doc
        .get("self")
        .and_then(|s| s.as_str())
        .unwrap_or("")
        .to_owned();
    let members = layout::members(&doc).unwrap_or_default();
    let mut docs = vec![doc];
    for member in members.iter().filter(|m| **m != me) {
        if let Ok(url) = BaseUrl::parse(member)
            && let Ok(d) = get_layout(&url, timeout)
        {
            docs.push(d);
        }
    }
    docs
}

/// Polls until settled (exit 0) or `total` passed (exit 3).
fn wait(
    url: &BaseUrl,
    timeout: Duration,
    total: Duration,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    let deadline = Instant::now() + total;
    let mut last = String::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(CtlError::Format(format!(
                "the layout did not settle within {} ms (last: {})",
                total.as_millis(),
                last.trim_end()
            )));
        }
        let doc = get_layout(url, timeout.min(left))?;
        let docs = with_members(doc, timeout.min(left));
        let (line, settled) = layout::progress_line(&docs).map_err(CtlError::Format)?;
        if line != last {
            write_out(out, line.as_bytes())?;
            last = line;
        }
        if settled {
            return Ok(());
        }
        std::thread::sleep(WAIT_POLL_INTERVAL.min(left));
    }
}
