//! The second instance (Redis mode): a process of its own that shares the first instance's
//! breakers through Redis, takes saves while the first one's opening holds, and says through
//! its `/policy` whether its own breaker refused them because of that opening.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::time::Instant;
use velocity_policy::Registry;

use super::Options;
use super::load::{Load, Route, Sample};
use super::measure::search_calls_from;
use crate::DemoError;
use crate::client;
use crate::stack::{ProviderUrls, Providers};

/// What the second instance did in Redis mode.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedReport {
    /// The phase it took saves in.
    pub phase: usize,
    /// How long it took saves (while the first instance's opening held).
    pub window: Duration,
    /// Saves it answered.
    pub saves: u64,
    /// Calls it made to the search provider in that window.
    pub calls_to_search: u64,
    /// Calls the first instance made to the search provider in that window.
    pub calls_to_search_from_a: u64,
    /// Refusals of its `search` breaker (from its `/policy`).
    pub refusals: u64,
    /// What its `search` breaker says opened it.
    pub cause: String,
}

/// The second instance, in its own process (Redis mode).
pub(super) struct SecondInstance {
    child: Child,
    /// Where it listens.
    pub(super) url: String,
}

impl SecondInstance {
    /// The second instance `options` ask for: one with a Redis URL, none without.
    pub(super) async fn for_options(
        options: &Options,
        prefix: &str,
        urls: &ProviderUrls,
    ) -> Result<Option<Self>, DemoError> {
        match (&options.redis_url, &options.instance_binary) {
            (Some(url), Some(binary)) => Ok(Some(Self::start(binary, url, prefix, urls).await?)),
            (Some(_), None) => Err(DemoError::Setup(
                "REDIS_URL is set but no binary was given to run the second instance".into(),
            )),
            _ => Ok(None),
        }
    }

    pub(super) async fn start(
        binary: &PathBuf,
        redis_url: &str,
        prefix: &str,
        urls: &ProviderUrls,
    ) -> Result<Self, DemoError> {
        let mut child = Command::new(binary)
            .args(["instance", "--name", "b", "--redis-prefix", prefix])
            .args(["--search", &urls.search])
            .args(["--notifier", &urls.notifier])
            .args(["--sessions", &urls.sessions])
            .env("REDIS_URL", redis_url)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                DemoError::Setup(format!(
                    "cannot start the second instance ({}): {e}",
                    binary.display()
                ))
            })?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| DemoError::Setup("the second instance has no stdout".into()))?;
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .map_err(|_| DemoError::Setup("the second instance did not start in 30 s".into()))??;
        let url = first
            .as_deref()
            .and_then(|l| l.strip_prefix("listening "))
            .map(str::to_owned)
            .ok_or_else(|| {
                DemoError::Setup(format!(
                    "the second instance said {first:?} instead of its address"
                ))
            })?;
        Ok(Self { child, url })
    }

    pub(super) async fn stop(mut self) {
        // Closing its stdin asks it to stop; it is killed if it does not.
        drop(self.child.stdin.take());
        if tokio::time::timeout(Duration::from_secs(5), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// The second instance's turn in a phase: how long it took saves, and how many calls the first
/// instance made to the search provider meanwhile.
#[derive(Debug, Clone, Copy)]
pub(super) struct Window {
    length: Duration,
    calls_from_a: u64,
}

/// The second instance's turn as a phase goes: waiting for the first instance to open the
/// shared breaker, taking saves while that opening holds (less 200 ms), then over.
#[derive(Debug, Default)]
pub(super) struct Turn {
    /// (from, until, search calls from `a` at `from`).
    open: Option<(Instant, Instant, u64)>,
    closed: Option<Window>,
}

impl Turn {
    pub(super) fn is_over(&self) -> bool {
        self.closed.is_some()
    }

    /// One tick of the second instance's saves to `b`, in phase `index` that ends at `end`.
    pub(super) fn tick(
        &mut self,
        load: &Arc<Load>,
        b: &str,
        index: usize,
        end: Instant,
        providers: &Providers,
    ) {
        let now = Instant::now();
        match self.open {
            None => {
                // The second instance takes saves only once the first has opened the
                // shared breaker, and only while that opening holds.
                if let Some(until) = Registry::global()
                    .find_breaker("search")
                    .and_then(|breaker| breaker.open_until())
                {
                    let until = until.min(end);
                    if until > now + Duration::from_millis(400) {
                        let from_a = search_calls_from(providers, "a");
                        self.open = Some((now, until - Duration::from_millis(200), from_a));
                    }
                }
            }
            Some((_, until, _)) if now < until => load.save(b, "b", index, Route::SaveOnB),
            Some(open) => self.closed = Some(Window::of(open, providers)),
        }
    }

    /// Its window: closed, or still open when the phase ended.
    pub(super) fn window(self, providers: &Providers) -> Option<Window> {
        self.closed
            .or_else(|| self.open.map(|open| Window::of(open, providers)))
    }
}

impl Window {
    fn of((from, until, from_a): (Instant, Instant, u64), providers: &Providers) -> Self {
        Window {
            length: until.saturating_duration_since(from),
            calls_from_a: search_calls_from(providers, "a") - from_a,
        }
    }
}

/// The saves it answered, and every call it made to the search provider: it took saves only in
/// its window, and called nothing else that reaches the search provider.
pub(super) fn count_saves(shared: &mut SharedReport, samples: &[Sample], providers: &Providers) {
    shared.saves = samples.iter().filter(|s| s.route == Route::SaveOnB).count() as u64;
    shared.calls_to_search = search_calls_from(providers, "b");
}

/// What the second instance's `/policy` says about its `search` breaker.
pub(super) async fn shared_report(
    load: &Load,
    b: &str,
    phase: usize,
    window: Window,
) -> SharedReport {
    let mut report = SharedReport {
        phase,
        window: window.length,
        saves: 0,
        calls_to_search: 0,
        calls_to_search_from_a: window.calls_from_a,
        refusals: 0,
        cause: String::new(),
    };
    let snapshot = match client::get(&load.client, &format!("{b}/policy")).await {
        Ok(reply) => serde_json::from_slice::<serde_json::Value>(&reply.body).ok(),
        Err(_) => None,
    };
    if let Some(search) = snapshot.as_ref().and_then(|s| {
        s["breakers"]
            .as_array()
            .and_then(|all| all.iter().find(|b| b["name"] == "search"))
    }) {
        report.refusals = search["refusals"].as_u64().unwrap_or(0);
        report.cause = match &search["last_cause"] {
            serde_json::Value::Null => String::new(),
            cause => cause["detail"]
                .as_str()
                .map_or_else(|| cause.to_string(), |d| format!("another instance: {d}")),
        };
    }
    report
}
