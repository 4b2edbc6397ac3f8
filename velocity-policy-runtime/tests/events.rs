//! Every mechanism's tracing events carry the documented, stable fields (`operation`,
//! `mechanism`, `name`, `kind`, a short `reason` code and the numbers as their own fields), and
//! an annotated call is one span named after its operation.
#![allow(
    clippy::unwrap_used,
    reason = "a test: a poisoned lock is a failed test"
)]

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use velocity_policy_runtime::__macro_support::{Calls, traced, tracing as tr};
use velocity_policy_runtime::defer::{AfterResponse, ImmediatePlatform, RequestId};
use velocity_policy_runtime::retry::{Idempotent, retry_within};
use velocity_policy_runtime::{
    BackgroundPool, Breaker, Bulkhead, CallError, Deadline, RetryAllowance, RetryPolicy, Shedder,
    Transient, WorkClass,
};

/// One event's fields as text, with the names of the spans it is inside (outermost first).
#[derive(Debug, Clone, Default)]
struct Captured {
    fields: BTreeMap<String, String>,
    spans: Vec<(String, BTreeMap<String, String>)>,
}

impl Captured {
    fn get(&self, field: &str) -> Option<&str> {
        self.fields.get(field).map(String::as_str)
    }
}

#[derive(Default)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

thread_local! {
    static EVENTS: RefCell<Option<Vec<Captured>>> = const { RefCell::new(None) };
}

/// Keeps each `policy` event, with its fields and its spans', for the thread that emitted it.
struct Keep;

impl<S: Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Keep {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        ctx.span(id).unwrap().extensions_mut().insert(fields.0);
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if event.metadata().target() != "policy" {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let spans = ctx
            .event_scope(event)
            .map(|scope| {
                scope
                    .from_root()
                    .map(|span| {
                        let fields = span
                            .extensions()
                            .get::<BTreeMap<String, String>>()
                            .cloned()
                            .unwrap_or_default();
                        (span.name().to_owned(), fields)
                    })
                    .collect()
            })
            .unwrap_or_default();
        EVENTS.with(|events| {
            if let Some(events) = &mut *events.borrow_mut() {
                events.push(Captured {
                    fields: fields.0,
                    spans,
                });
            }
        });
    }
}

/// Runs `test` on a paused current-thread runtime and returns the `policy` events it emitted.
fn events_of<F: std::future::Future<Output = ()>>(test: impl FnOnce() -> F) -> Vec<Captured> {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let subscriber = tracing_subscriber::registry().with(Keep);
        tracing::subscriber::set_global_default(subscriber).unwrap();
    });
    EVENTS.with(|events| *events.borrow_mut() = Some(Vec::new()));
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(test());
    EVENTS.with(|events| events.borrow_mut().take().unwrap())
}

/// The one event of `kind`, with the common fields checked against `expected`.
fn one<'a>(events: &'a [Captured], kind: &str, expected: &[(&str, &str)]) -> &'a Captured {
    let matching: Vec<&Captured> = events
        .iter()
        .filter(|e| e.get("kind") == Some(kind))
        .collect();
    assert_eq!(matching.len(), 1, "one `{kind}` event in {events:#?}");
    let event = matching[0];
    for (field, value) in expected {
        assert_eq!(event.get(field), Some(*value), "`{field}` of {event:#?}");
    }
    // A code, not a sentence: no spaces, no digits.
    let reason = event.get("reason").unwrap();
    assert!(
        reason.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
        "reason `{reason}` is a short code"
    );
    event
}

#[test]
fn a_breaker_opening_its_refusals_and_its_closing_have_codes_and_numbers() {
    let events = events_of(|| async {
        let breaker = Breaker::builder("payments")
            .open_after_failures(2, Duration::from_secs(10))
            .cooldown(Duration::from_secs(5))
            .build();
        breaker.record_failure();
        breaker.record_failure();
        assert!(breaker.check().is_err());
        tokio::time::advance(Duration::from_secs(6)).await;
        assert!(breaker.check().is_ok());
    });
    let opened = one(
        &events,
        "breaker_opened",
        &[
            ("mechanism", "breaker"),
            ("name", "payments"),
            ("reason", "failures"),
            ("count", "2"),
            ("window_ms", "10000"),
            ("open_for_ms", "5000"),
        ],
    );
    assert_eq!(opened.get("operation"), None, "outside any call");
    one(
        &events,
        "breaker_open",
        &[
            ("mechanism", "breaker"),
            ("name", "payments"),
            ("reason", "failures"),
            ("remaining_ms", "5000"),
            ("count", "2"),
            ("window_ms", "10000"),
        ],
    );
    one(
        &events,
        "breaker_closed",
        &[
            ("mechanism", "breaker"),
            ("name", "payments"),
            ("reason", "cooldown"),
        ],
    );
}

#[test]
fn a_trip_past_the_cap_says_retry_after_with_the_asked_and_capped_pauses() {
    let events = events_of(|| async {
        let breaker = Breaker::builder("rates")
            .max_retry_after(Duration::from_secs(3))
            .build();
        breaker.trip(Duration::from_secs(4), "429 Too Many Requests");
    });
    one(
        &events,
        "retry_after_capped",
        &[
            ("mechanism", "breaker"),
            ("reason", "max_retry_after"),
            ("asked_ms", "4000"),
            ("cap_ms", "3000"),
        ],
    );
    one(
        &events,
        "breaker_opened",
        &[
            ("reason", "retry_after"),
            ("retry_after_ms", "4000"),
            ("open_for_ms", "3000"),
        ],
    );
}

#[test]
fn bulkhead_refusals_say_full_or_queue_timeout() {
    let events = events_of(|| async {
        let bulkhead = Bulkhead::builder("search")
            .max_concurrent(1)
            .max_queued(1)
            .build();
        let _held = bulkhead.try_acquire().unwrap();
        let deadline = Deadline::after(Duration::from_millis(250));
        let queued = bulkhead.acquire(&deadline);
        let full = bulkhead.try_acquire();
        assert!(full.is_err());
        assert!(queued.await.is_err());
    });
    let (full, timeout): (Vec<Captured>, Vec<Captured>) = events
        .into_iter()
        .partition(|e| e.get("reason") == Some("full"));
    one(
        &full,
        "bulkhead_full",
        &[
            ("mechanism", "bulkhead"),
            ("name", "search"),
            ("reason", "full"),
            ("max_concurrent", "1"),
            // `try_acquire` never queues: no queue place was open to it (issue 41: it used to
            // say the bulkhead's one place was taken while it was free).
            ("max_queued", "0"),
        ],
    );
    // The queue timeout is the same kind, told apart by its reason.
    let timeout = one(
        &timeout,
        "bulkhead_full",
        &[("mechanism", "bulkhead"), ("reason", "queue_timeout")],
    );
    assert_eq!(timeout.get("waited_ms"), Some("250"));
}

#[test]
fn shed_decisions_say_load_or_budget_with_their_numbers() {
    let events = events_of(|| async {
        let shedder = Shedder::new("checkout");
        let d = Deadline::after(Duration::from_secs(1));
        assert!(
            shedder
                .admit(WorkClass::Background, 0.9, &d, Duration::ZERO)
                .is_err()
        );
        assert!(
            shedder
                .admit(WorkClass::Critical, 0.0, &d, Duration::from_secs(2))
                .is_err()
        );
    });
    let sheds: Vec<&Captured> = events
        .iter()
        .filter(|e| e.get("kind") == Some("shed"))
        .collect();
    assert_eq!(sheds.len(), 2, "{events:#?}");
    let load = sheds[0];
    assert_eq!(load.get("mechanism"), Some("shedder"));
    assert_eq!(load.get("name"), Some("checkout"));
    assert_eq!(load.get("reason"), Some("load"));
    assert_eq!(load.get("class"), Some("background"));
    assert_eq!(load.get("load"), Some("0.9"));
    assert!(load.get("threshold").is_some());
    let budget = sheds[1];
    assert_eq!(budget.get("reason"), Some("budget"));
    assert_eq!(budget.get("remaining_ms"), Some("1000"));
    assert_eq!(budget.get("expected_cost_ms"), Some("2000"));
}

#[test]
fn a_deadline_refusal_says_min_budget_and_carries_the_operation() {
    let events = events_of(|| async {
        let call = Deadline::after(Duration::from_millis(30)).scope(async {
            Deadline::for_operation("lookup", Duration::from_secs(2), Duration::from_millis(50))
        });
        let span =
            tr::info_span!(target: "policy", "lookup", operation = "lookup", class = "critical");
        static LOOKUP: Calls = Calls::new("lookup");
        assert!(traced(&LOOKUP, span, call).await.is_err());
    });
    let refused = one(
        &events,
        "insufficient_budget",
        &[
            ("operation", "lookup"),
            ("mechanism", "deadline"),
            ("name", "lookup"),
            ("reason", "min_budget"),
            ("remaining_ms", "30"),
            ("min_budget_ms", "50"),
        ],
    );
    // Inside the call's one span, named after the operation, with its class.
    assert_eq!(refused.spans.len(), 1, "{refused:#?}");
    let (span, fields) = &refused.spans[0];
    assert_eq!(span, "lookup");
    assert_eq!(fields.get("operation").map(String::as_str), Some("lookup"));
    assert_eq!(fields.get("class").map(String::as_str), Some("critical"));
}

#[derive(Debug)]
struct Flaky;

impl Transient for Flaky {
    fn is_transient(&self) -> bool {
        true
    }
}

#[test]
fn retries_say_what_the_attempt_ended_with_and_stops_say_deadline_or_budget() {
    let events = events_of(|| async {
        let allowance = Arc::new(RetryAllowance::new(Duration::from_secs(10), 1, 0.0));
        let policy = RetryPolicy::builder("transient")
            .attempts(5)
            .backoff(Duration::from_millis(10), Duration::from_millis(10))
            .allowance(allowance)
            .build();
        let deadline = Deadline::after(Duration::from_secs(5));
        let call = retry_within(
            &deadline,
            &policy,
            Idempotent::claim(|_| async { Err::<(), _>(CallError::Failed(Flaky)) }),
        );
        let span = tr::info_span!(target: "policy", "sync", operation = "sync", class = "critical");
        static SYNC: Calls = Calls::new("sync");
        assert!(traced(&SYNC, span, call).await.is_err());
    });
    // The floor of one per second over ten seconds allows ten; five attempts use four.
    let retries: Vec<&Captured> = events
        .iter()
        .filter(|e| e.get("kind") == Some("retry"))
        .collect();
    assert!(!retries.is_empty(), "{events:#?}");
    for retry in &retries {
        assert_eq!(retry.get("operation"), Some("sync"));
        assert_eq!(retry.get("mechanism"), Some("retry"));
        assert_eq!(retry.get("name"), Some("transient"));
        assert_eq!(retry.get("reason"), Some("failed"));
        assert!(retry.get("delay_ms").unwrap().parse::<u64>().unwrap() <= 10);
        assert!(retry.get("attempt").is_some());
    }

    let stopped = events_of(|| async {
        let allowance = Arc::new(RetryAllowance::new(Duration::from_secs(10), 0, 0.0));
        let policy = RetryPolicy::builder("none-left")
            .allowance(allowance)
            .build();
        let _: Result<(), CallError<Flaky>> = retry_within(
            &Deadline::after(Duration::from_secs(5)),
            &policy,
            Idempotent::claim(|_| async { Err(CallError::Failed(Flaky)) }),
        )
        .await;
    });
    one(
        &stopped,
        "retry_stopped",
        &[
            ("mechanism", "retry"),
            ("name", "none-left"),
            ("reason", "budget"),
            ("attempt", "1"),
        ],
    );
}

#[derive(Debug)]
struct IndexError;

impl fmt::Display for IndexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("search index unavailable: shard 3")
    }
}

#[test]
fn task_events_name_their_class_as_the_mechanism_and_keep_the_error_apart() {
    let events = events_of(|| async {
        let platform = ImmediatePlatform::new();
        let after = AfterResponse::with_platform(RequestId::new("req-7"), platform.clone());
        after.defer("index_document", async { Err::<(), _>(IndexError) });
        after.release();
        let pool = BackgroundPool::builder("media")
            .max_concurrent(1)
            .max_queued(0)
            .platform(platform.clone())
            .build();
        pool.submit("transcode-1", tokio::time::sleep(Duration::from_secs(1)))
            .unwrap();
        assert!(pool.submit("transcode-2", async {}).is_err());
        platform.settled().await;
    });
    let failed = one(
        &events,
        "task_failed",
        &[
            ("mechanism", "deferred"),
            ("class", "deferred"),
            ("name", "index_document"),
            ("reason", "error"),
            ("error", "search index unavailable: shard 3"),
        ],
    );
    assert_eq!(
        failed.spans.first().map(|(name, _)| name.as_str()),
        Some("task")
    );
    one(
        &events,
        "shed",
        &[
            ("mechanism", "background"),
            ("name", "media"),
            ("class", "background"),
            ("reason", "load"),
            ("load", "1.0"),
            ("threshold", "1.0"),
        ],
    );
}

#[test]
fn hedges_say_when_they_start_which_won_and_how_many_were_dropped() {
    use velocity_policy_runtime::hedge::{Hedge, hedge_within};
    let events = events_of(|| async {
        let hedge = Hedge::builder("tail")
            .after(Duration::from_millis(10))
            .max(3)
            .build();
        let deadline = Deadline::after(Duration::from_secs(1));
        // The first attempt is slow, the first hedge answers, the second hedge is slower.
        let call = hedge_within(
            &deadline,
            &hedge,
            Idempotent::claim(
                |attempt: velocity_policy_runtime::retry::Attempt| async move {
                    let ms = [500, 15, 500][attempt.number as usize - 1];
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    Ok::<_, CallError<Flaky>>(attempt.number)
                },
            ),
        );
        let span = tr::info_span!(target: "policy", "read", operation = "read", class = "critical");
        static READ: Calls = Calls::new("read");
        assert_eq!(traced(&READ, span, call).await.unwrap(), 2);
    });
    let of = |kind| -> Vec<&Captured> {
        events
            .iter()
            .filter(|e| e.get("kind") == Some(kind))
            .collect()
    };
    let started = of("hedge");
    assert_eq!(started.len(), 2, "{events:#?}");
    for (event, attempt) in started.iter().zip(["2", "3"]) {
        assert_eq!(event.get("operation"), Some("read"));
        assert_eq!(event.get("mechanism"), Some("hedge"));
        assert_eq!(event.get("name"), Some("tail"));
        assert_eq!(event.get("reason"), Some("slow"));
        assert_eq!(event.get("attempt"), Some(attempt));
        assert_eq!(event.get("delay_ms"), Some("10"));
    }
    let won = of("hedge_won");
    assert_eq!(won.len(), 1);
    assert_eq!(won[0].get("reason"), Some("first_answer"));
    assert_eq!(won[0].get("attempt"), Some("2"), "the first hedge answered");
    let lost = of("hedge_lost");
    assert_eq!(lost.len(), 1);
    assert_eq!(lost[0].get("reason"), Some("cancelled"));
    assert_eq!(
        lost[0].get("count"),
        Some("1"),
        "the second hedge was dropped"
    );
}

#[test]
fn an_adaptive_limit_tells_of_material_moves_only() {
    use velocity_policy_runtime::bulkhead::AdaptiveLimit;
    use velocity_policy_testkit::capacity::Capacity;

    let told = || {
        EVENTS.with(|events| {
            events.borrow().as_ref().map_or(0, |events| {
                events
                    .iter()
                    .filter(|e| e.get("kind") == Some("bulkhead_limit"))
                    .count()
            })
        })
    };
    let mut settled_told = (0, 0);
    let events = events_of(|| async {
        let api = Bulkhead::builder("adaptive-api")
            .adaptive(AdaptiveLimit::new(4, 64))
            .build();
        let dependency = Capacity::new(32, Duration::from_millis(20));
        let _load = {
            let api = api.clone();
            dependency.saturate(40, move || api.try_acquire_owned().ok())
        };
        tokio::time::sleep(Duration::from_secs(3)).await;
        dependency.set_slots(8);
        tokio::time::sleep(Duration::from_secs(3)).await;
        let before = told();
        // Settled at the new capacity: it moves by a slot now and then, which is not news.
        tokio::time::sleep(Duration::from_secs(3)).await;
        settled_told = (before, told());
    });
    let limits: Vec<_> = events
        .iter()
        .filter(|e| e.get("kind") == Some("bulkhead_limit"))
        .collect();
    let grew = limits
        .iter()
        .filter(|e| e.get("reason") == Some("headroom"))
        .count();
    let cut: Vec<_> = limits
        .iter()
        .filter(|e| e.get("reason") == Some("queueing"))
        .collect();
    assert!(
        (3..=12).contains(&grew),
        "from 4 to 32 in a few steps: {limits:#?}"
    );
    assert!(!cut.is_empty(), "the drop to 8 is told");
    let last_cut = cut.last().unwrap();
    assert_eq!(last_cut.get("mechanism"), Some("bulkhead"));
    assert_eq!(last_cut.get("name"), Some("adaptive-api"));
    let to: u32 = last_cut.get("to").unwrap().parse().unwrap();
    assert!((8..=10).contains(&to), "{last_cut:#?}");
    for field in [
        "from",
        "latency_noload_ms",
        "latency_recent_ms",
        "queue_estimate",
    ] {
        assert!(last_cut.get(field).is_some(), "`{field}` in {last_cut:#?}");
    }
    assert_eq!(settled_told.0, settled_told.1, "nothing told once settled");
}
