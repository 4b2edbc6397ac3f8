//! What the mechanisms said, per phase: the runtime's tracing events (target `policy`), counted
//! by `kind`, `name` and reason, and every breaker opening kept with its cause.
//!
//! The runtime makes every mechanism observable through events with stable fields (`kind`,
//! `name`, a `reason` code, and for an opening `count`, `window_ms` and `open_for_ms`); this
//! layer is all the demo
//! needs to report refusals by kind, shed decisions by reason, retries spent and breaker
//! openings with the count and window that opened them.
//!
//! Bounded, so a service can record them for a month: the counts are keyed by phase, `kind`,
//! `name` and detail, all of which come from the program (phases the scenario declares, the
//! runtime's event kinds, mechanism and task names, reason codes), never from a request; the
//! openings kept are the latest [`MAX_OPENINGS`], and older ones are only counted
//! ([`EventLog::openings_forgotten`]).

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use tracing::field::{Field, Visit};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};

/// One breaker opening.
#[derive(Debug, Clone, PartialEq)]
pub struct Opening {
    /// The phase it happened in.
    pub phase: usize,
    /// When, from the start of the log.
    pub at: Duration,
    /// The breaker's name.
    pub breaker: String,
    /// What opened it, in words made from the event's reason code and numbers.
    pub cause: String,
    /// Failures counted, when failures opened it.
    pub count: Option<u64>,
    /// The window they were counted in, when failures opened it.
    pub window: Option<String>,
    /// How long it opened for.
    pub open_for: String,
    /// The event's reason code (`failures`, `probe_failed`, `retry_after`, `shared`...).
    pub reason: String,
    /// How long it opened for, in milliseconds.
    pub open_for_ms: Option<u64>,
    /// What the dependency asked for, in milliseconds, when its `Retry-After` opened it.
    pub retry_after_ms: Option<u64>,
    /// The chaos drill that injected the failure that opened it (the event's `drill`), if one
    /// did: a drill, not an incident.
    pub injected_by: Option<String>,
}

/// Events of one kind, name and detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counted {
    /// The event's `kind` (a refusal kind, `shed`, `retry`, `fallback`, ...).
    pub kind: String,
    /// The mechanism's or task's name.
    pub name: String,
    /// The reason or class, where the event has one.
    pub detail: String,
    /// How many.
    pub count: u64,
}

/// How many breaker openings the log keeps (the latest ones); a scenario has a few dozen.
pub const MAX_OPENINGS: usize = 1024;

#[derive(Debug, Default)]
struct Records {
    counts: BTreeMap<(usize, String, String, String), u64>,
    openings: VecDeque<Opening>,
    forgotten: u64,
}

/// The process's record of policy events.
#[derive(Debug)]
pub struct EventLog {
    started: Instant,
    phase: AtomicUsize,
    records: Mutex<Records>,
}

// A poisoned lock means a panic elsewhere while it was held; the records are still usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// A global tracing subscriber was already installed by someone else.
#[derive(Debug, thiserror::Error)]
#[error("cannot record the policy events: another global tracing subscriber is already installed")]
pub struct AlreadyInstalled;

impl EventLog {
    /// The process's log, installing it as the global tracing subscriber the first time.
    pub fn install() -> Result<&'static EventLog, AlreadyInstalled> {
        static LOG: OnceLock<Result<&'static EventLog, ()>> = OnceLock::new();
        let installed = LOG.get_or_init(|| {
            let log: &'static EventLog = Box::leak(Box::new(EventLog {
                started: Instant::now(),
                phase: AtomicUsize::new(0),
                records: Mutex::default(),
            }));
            let subscriber = tracing_subscriber::registry().with(EventLayer { log });
            tracing::subscriber::set_global_default(subscriber)
                .map(|()| log)
                .map_err(|_| ())
        });
        installed.map_err(|()| AlreadyInstalled)
    }

    /// Events from now on are counted in `phase`.
    pub fn set_phase(&self, phase: usize) {
        self.phase.store(phase, Ordering::SeqCst);
    }

    /// Every count of `phase`.
    pub fn counts(&self, phase: usize) -> Vec<Counted> {
        lock(&self.records)
            .counts
            .iter()
            .filter(|((p, ..), _)| *p == phase)
            .map(|((_, kind, name, detail), count)| Counted {
                kind: kind.clone(),
                name: name.clone(),
                detail: detail.clone(),
                count: *count,
            })
            .collect()
    }

    /// How many openings were dropped from the log to keep it at [`MAX_OPENINGS`].
    pub fn openings_forgotten(&self) -> u64 {
        lock(&self.records).forgotten
    }

    /// Every breaker opening of `phase` still kept (the latest [`MAX_OPENINGS`]), in order.
    pub fn openings(&self, phase: usize) -> Vec<Opening> {
        lock(&self.records)
            .openings
            .iter()
            .filter(|o| o.phase == phase)
            .cloned()
            .collect()
    }

    fn record(&self, fields: Fields) {
        let Some(kind) = fields.kind.clone() else {
            return;
        };
        if kind == "injected" {
            // For the task whose work met it (the timeline's per-request count).
            crate::timeline::injected_seen();
        }
        let phase = self.phase.load(Ordering::SeqCst);
        let name = fields.name.clone().unwrap_or_default();
        let mut records = lock(&self.records);
        if kind == "breaker_opened" {
            if records.openings.len() >= MAX_OPENINGS {
                records.openings.pop_front();
                records.forgotten += 1;
            }
            records.openings.push_back(Opening {
                phase,
                at: self.started.elapsed(),
                breaker: name.clone(),
                cause: fields.cause(),
                count: fields.count,
                window: fields.window.clone(),
                open_for: fields.open_for.clone().unwrap_or_default(),
                reason: fields.reason.clone().unwrap_or_default(),
                open_for_ms: fields.open_for_ms,
                retry_after_ms: fields.retry_after_ms,
                injected_by: fields.drill.clone(),
            });
        }
        let detail = match kind.as_str() {
            // Why it was shed, and which class of work.
            "shed" => format!(
                "{} work, {}",
                fields.class.unwrap_or_default(),
                fields.reason.unwrap_or_default()
            ),
            "retry_stopped" => match fields.reason.as_deref() {
                Some("budget") => "the retry budget was spent".to_owned(),
                Some("deadline") => "the next pause would end past the deadline".to_owned(),
                other => other.unwrap_or_default().to_owned(),
            },
            "fallback" => fields.reason.unwrap_or_default(),
            // Which fault a drill injected.
            "injected" => fields.reason.unwrap_or_default(),
            _ => String::new(),
        };
        *records
            .counts
            .entry((phase, kind, name, detail))
            .or_default() += 1;
    }
}

struct EventLayer {
    log: &'static EventLog,
}

fn wanted(metadata: &Metadata<'_>) -> bool {
    metadata.target() == "policy"
        && metadata.is_event()
        && *metadata.level() <= tracing::Level::DEBUG
}

impl<S: Subscriber> Layer<S> for EventLayer {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if wanted(metadata) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>, _ctx: Context<'_, S>) -> bool {
        wanted(metadata)
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        self.log.record(fields);
    }
}

#[derive(Default)]
struct Fields {
    kind: Option<String>,
    name: Option<String>,
    reason: Option<String>,
    class: Option<String>,
    count: Option<u64>,
    window: Option<String>,
    open_for: Option<String>,
    open_for_ms: Option<u64>,
    retry_after: Option<String>,
    retry_after_ms: Option<u64>,
    drill: Option<String>,
}

/// A field in milliseconds, as a duration's debug form (`30s`, `250ms`).
fn from_ms(value: &str) -> Option<String> {
    value
        .parse()
        .ok()
        .map(|ms| format!("{:?}", Duration::from_millis(ms)))
}

impl Fields {
    /// An opening's cause in words, from its reason code and numbers.
    fn cause(&self) -> String {
        let count = self.count.unwrap_or_default();
        let window = self.window.as_deref().unwrap_or("its window");
        let cause = match self.reason.as_deref().unwrap_or_default() {
            "failures" => format!("{count} failures within {window}"),
            "failure_ratio" => format!("{count} failures, at or above its ratio, within {window}"),
            "probe_failed" => "a probe failed right after the cooldown".to_owned(),
            "retry_after" => format!(
                "the dependency asked for {}",
                self.retry_after.as_deref().unwrap_or("a pause")
            ),
            "shared" => "another instance".to_owned(),
            other => other.to_owned(),
        };
        match &self.drill {
            Some(drill) => format!("{cause}, the last one injected by drill `{drill}` (a drill)"),
            None => cause,
        }
    }

    fn set(&mut self, field: &Field, value: String) {
        match field.name() {
            "kind" => self.kind = Some(value),
            "name" => self.name = Some(value),
            "reason" => self.reason = Some(value),
            "class" => self.class = Some(value),
            "window_ms" => self.window = from_ms(&value),
            "open_for_ms" => {
                self.open_for = from_ms(&value);
                self.open_for_ms = value.parse().ok();
            }
            "retry_after_ms" => {
                self.retry_after = from_ms(&value);
                self.retry_after_ms = value.parse().ok();
            }
            "count" => self.count = value.parse().ok(),
            "drill" => self.drill = Some(value),
            _ => {}
        }
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.set(field, value.to_owned());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.set(field, value.to_string());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.set(field, value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            return;
        }
        self.set(field, format!("{value:?}"));
    }
}
