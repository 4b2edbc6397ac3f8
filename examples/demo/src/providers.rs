//! The service's dependencies, faked as real HTTP servers on loopback: the search provider, the
//! notifier and the session store, each a thin wrapper over the test kit's fake dependency
//! ([`velocity_policy_testkit::fake::http`]) with its name, its usual latency and its routes (the session
//! store answers `GET /sessions/{user}`). Each one's behaviour can be switched while it runs
//! ([`Mode`]), and each counts the requests it received, per calling instance (the `x-caller`
//! header), the most it ever had in flight at once, and the budgets its callers gave it (the
//! `x-deadline-ms` header the service's `PropagateDeadlineLayer` sets: [`Budgets`]).
//!
//! A running provider can also be switched from outside with `POST /_mode` and a body such as
//! `healthy`, `slow 800ms`, `failing` or `429 5s` (see [`Mode::parse`]).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tokio::net::TcpListener;
use velocity_policy_testkit::fake::http::{CallerCounts, Deadlines, FakeHttp};
use velocity_policy_testkit::fake::{Behaviour, FakeDependency};

use crate::server::{ServeLimits, Server};

pub use velocity_policy_testkit::fake::http::{MAX_CALLER_LEN, MAX_CALLERS, OTHER_CALLERS};

/// The shortest delay of [`Mode::Slow`].
pub const SLOWEST_FLOOR: Duration = Duration::from_millis(50);
/// The longest delay of [`Mode::Slow`].
pub const SLOWEST_CEILING: Duration = Duration::from_secs(5);

/// How a fake provider behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Mode {
    /// Answers 200 after its usual latency.
    Healthy,
    /// Answers 200 after `delay` (between 50 ms and 5 s).
    Slow {
        /// How long each answer takes.
        delay: Duration,
    },
    /// Answers 503 at once, to everything.
    Failing,
    /// Answers 429 with `Retry-After` at once.
    RateLimited {
        /// The `Retry-After` it sends (whole seconds).
        retry_after: Duration,
    },
}

impl Mode {
    /// A slow provider, its delay kept between 50 ms and 5 s.
    pub fn slow(delay: Duration) -> Self {
        Self::Slow {
            delay: delay.clamp(SLOWEST_FLOOR, SLOWEST_CEILING),
        }
    }

    /// A provider answering 429 with `Retry-After: retry_after` (rounded up to whole seconds,
    /// as the header carries).
    pub fn rate_limited(retry_after: Duration) -> Self {
        let secs = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
        Self::RateLimited {
            retry_after: Duration::from_secs(secs.max(1)),
        }
    }

    /// Parses `healthy`, `slow 800ms`, `failing` or `429 5s`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut words = text.split_whitespace();
        let mode = words.next().unwrap_or_default();
        let arg = words.next();
        let duration = |arg: Option<&str>| -> Result<Duration, String> {
            let arg = arg.ok_or_else(|| format!("`{mode}` needs a duration, such as `800ms`"))?;
            let (digits, unit) = arg
                .find(|c: char| !c.is_ascii_digit())
                .map_or((arg, "ms"), |at| arg.split_at(at));
            let n: u64 = digits
                .parse()
                .map_err(|_| format!("`{arg}` is not a duration such as `800ms` or `5s`"))?;
            match unit {
                "ms" => Ok(Duration::from_millis(n)),
                "s" => Ok(Duration::from_secs(n)),
                other => Err(format!("unknown unit `{other}`: use `ms` or `s`")),
            }
        };
        match mode {
            "healthy" => Ok(Self::Healthy),
            "slow" => Ok(Self::slow(duration(arg)?)),
            "failing" | "down" => Ok(Self::Failing),
            "429" | "rate_limited" => Ok(Self::rate_limited(duration(arg)?)),
            other => Err(format!(
                "unknown mode `{other}`: use `healthy`, `slow 800ms`, `failing` or `429 5s`"
            )),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Healthy => f.write_str("healthy"),
            Self::Slow { delay } => write!(f, "slow ({} ms)", delay.as_millis()),
            Self::Failing => f.write_str("failing (503)"),
            Self::RateLimited { retry_after } => {
                write!(f, "429, Retry-After: {}", retry_after.as_secs())
            }
        }
    }
}

/// What one caller sent a provider.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Calls {
    /// Requests received.
    pub received: u64,
    /// Answered 2xx (or the session store's 404: that user has no session).
    pub ok: u64,
    /// Answered 503.
    pub failed: u64,
    /// Answered 429.
    pub rate_limited: u64,
}

impl Calls {
    /// The calls made since `before`.
    pub fn since(&self, before: &Calls) -> Calls {
        Calls {
            received: self.received.saturating_sub(before.received),
            ok: self.ok.saturating_sub(before.ok),
            failed: self.failed.saturating_sub(before.failed),
            rate_limited: self.rate_limited.saturating_sub(before.rate_limited),
        }
    }
}

/// The budgets a provider was given (the `x-deadline-ms` header), over some span of calls: a
/// count, the least, the most and the sum, so a provider keeps four numbers however long it
/// runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Budgets {
    /// Requests that carried a budget.
    pub with_budget: u64,
    /// Requests that carried none (or one that did not parse).
    pub without_budget: u64,
    /// The least budget received.
    pub min: Duration,
    /// The most budget received.
    pub max: Duration,
    /// The budgets' sum, for the mean.
    pub total: Duration,
}

impl Budgets {
    /// The mean budget received, if any was.
    pub fn mean(&self) -> Option<Duration> {
        let n = u32::try_from(self.with_budget).ok().filter(|n| *n > 0)?;
        Some(self.total / n)
    }
}

impl From<CallerCounts> for Calls {
    fn from(counts: CallerCounts) -> Self {
        Self {
            received: counts.received,
            ok: counts.ok,
            failed: counts.failed,
            rate_limited: counts.rate_limited,
        }
    }
}

impl From<Deadlines> for Budgets {
    fn from(seen: Deadlines) -> Self {
        Self {
            with_budget: seen.with_budget,
            without_budget: seen.without_budget,
            min: seen.min,
            max: seen.max,
            total: seen.total,
        }
    }
}

impl From<Mode> for Behaviour {
    fn from(mode: Mode) -> Self {
        match mode {
            Mode::Healthy => Behaviour::healthy(),
            Mode::Slow { delay } => Behaviour::slow(delay),
            Mode::Failing => Behaviour::down(),
            Mode::RateLimited { retry_after } => Behaviour::rate_limited(retry_after),
        }
    }
}

/// A fake provider: the test kit's fake dependency served on a loopback port.
pub struct FakeProvider {
    name: &'static str,
    fake: FakeHttp,
    server: Server,
}

impl fmt::Debug for FakeProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeProvider")
            .field("name", &self.name)
            .field("addr", &self.server.addr())
            .field("behaviour", &self.behaviour())
            .finish()
    }
}

impl FakeProvider {
    /// Starts a provider named `name` on a free loopback port, answering after
    /// `usual_latency` while healthy.
    pub async fn start(name: &'static str, usual_latency: Duration) -> std::io::Result<Self> {
        let dependency = FakeDependency::new(name).with_latency(usual_latency);
        let fake = FakeHttp::new(dependency)
            .respond_with(ok)
            .parse_mode_with(|text| Mode::parse(text).map(Behaviour::from));
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        // The service's client keeps idle connections for 30 s: a provider keeps them longer,
        // so it never closes one the client is about to reuse.
        let limits = ServeLimits {
            header_read_timeout: Duration::from_secs(60),
            ..ServeLimits::default()
        };
        let server = Server::spawn(
            listener,
            fake.router(),
            format!("the fake {name} provider"),
            limits,
        )?;
        Ok(Self { name, fake, server })
    }

    /// Its name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Its base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// How it behaves now (as the test kit names it: `POST /_mode` may have switched it).
    pub fn behaviour(&self) -> Behaviour {
        self.fake.dependency().behaviour()
    }

    /// Switches its behaviour; requests already waiting keep the behaviour they started with.
    pub fn set_mode(&self, mode: Mode) {
        self.fake.dependency().set(mode.into());
    }

    /// The calls received so far, per caller: at most [`MAX_CALLERS`] names, the rest counted
    /// under [`OTHER_CALLERS`].
    pub fn calls(&self) -> BTreeMap<String, Calls> {
        self.fake
            .callers()
            .into_iter()
            .map(|(caller, counts)| (caller, counts.into()))
            .collect()
    }

    /// The most requests it had in flight at once since the last call (then starts over).
    pub fn take_max_in_flight(&self) -> u32 {
        let most = self.fake.dependency().take_max_in_flight();
        u32::try_from(most).unwrap_or(u32::MAX)
    }

    /// The budgets its callers gave it since the last call (then starts over).
    pub fn take_budgets(&self) -> Budgets {
        self.fake.take_deadlines().into()
    }

    /// Stops accepting and waits for the open connections to finish.
    pub async fn stop(self) {
        self.server.stop().await;
    }
}

/// The users the fake session store has a session for: 1 to 1,000. Any other user's session
/// has ended (signed out or expired): the store answers 404.
pub const USERS_WITH_A_SESSION: std::ops::RangeInclusive<u64> = 1..=1000;

/// A 200 with a small JSON body; `GET /sessions/{user}` answers a session for that user, or a
/// 404 when that user has none ([`USERS_WITH_A_SESSION`]).
fn ok(method: &Method, uri: &Uri) -> Response {
    if method == Method::GET
        && let Some(user) = uri.path().strip_prefix("/sessions/")
        && let Ok(user) = user.parse::<u64>()
    {
        if !USERS_WITH_A_SESSION.contains(&user) {
            return (
                StatusCode::NOT_FOUND,
                [("content-type", "application/json")],
                "{\"error\":\"no session\"}",
            )
                .into_response();
        }
        let body = serde_json::json!({ "user": user, "can_write": true });
        return (
            StatusCode::OK,
            [("content-type", "application/json")],
            body.to_string(),
        )
            .into_response();
    }
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        "{\"ok\":true}",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use axum::body::Bytes;

    use super::*;
    use crate::client::{self, http_client};

    #[tokio::test]
    async fn a_provider_reads_mode_in_the_demos_words_and_serves_sessions() {
        let sessions = FakeProvider::start("sessions", Duration::ZERO)
            .await
            .unwrap();
        let http = http_client();
        let switch = format!("{}/_mode", sessions.url());
        let mode =
            |text: &'static str| client::send(&http, Method::POST, &switch, &[], Bytes::from(text));
        // The demo's bounds: a slow provider takes at least 50 ms, a Retry-After whole seconds.
        assert_eq!(mode("slow 10ms").await.unwrap().status, StatusCode::OK);
        assert_eq!(sessions.behaviour(), Behaviour::slow(SLOWEST_FLOOR));
        assert_eq!(mode("429 1500ms").await.unwrap().status, StatusCode::OK);
        assert_eq!(
            sessions.behaviour(),
            Behaviour::rate_limited(Duration::from_secs(2))
        );
        // Words the demo does not use are refused, though the kit would read them.
        assert_eq!(
            mode("flaky 30%").await.unwrap().status,
            StatusCode::BAD_REQUEST
        );

        sessions.set_mode(Mode::Healthy);
        let url = |user: u64| format!("{}/sessions/{user}", sessions.url());
        let known = client::get(&http, &url(7)).await.unwrap();
        assert_eq!(known.status, StatusCode::OK);
        let ended = client::get(&http, &url(5000)).await.unwrap();
        assert_eq!(ended.status, StatusCode::NOT_FOUND);
        // Both are answers: counted as ok.
        assert_eq!(sessions.calls()["unknown"].ok, 2);
        sessions.stop().await;
    }
}
