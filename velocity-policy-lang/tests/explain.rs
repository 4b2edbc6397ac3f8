//! `explain`'s bounds, checked by hand on three examples (and the unbounded case).

use std::time::Duration;

use velocity_policy_lang::PolicySet;
use velocity_policy_lang::explain::{Explanation, Step, explain_all};

fn explain(text: &str) -> Vec<Explanation> {
    let mut set = PolicySet::new();
    set.add_source("x.policy", text.as_bytes());
    assert!(!set.check().has_errors(), "{:?}", set.check().errors);
    explain_all(set.spec())
}

fn ms(ms: u64) -> Option<Duration> {
    Some(Duration::from_millis(ms))
}

/// Ninety seconds: three attempts at a 30 s timeout. Without propagation each
/// attempt waits its whole 30 s and the backoffs add 100 ms + 200 ms:
/// 3 × 30 s + 0.1 s + 0.2 s = 90.3 s. With propagation the 10 s request budget bounds it all.
#[test]
fn ninety_seconds_become_ten() {
    let [chat] = explain(
        "request { deadline = 10s }\n\
         retry provider { attempts = 3; backoff = full_jitter(base = 100ms, cap = 1s) }\n\
         operation chat_completion: critical, idempotent { retry = provider; deadline = 30s }\n",
    )
    .try_into()
    .unwrap();
    assert_eq!(chat.attempts, 3);
    assert_eq!(chat.bound_without_propagation, ms(90_300));
    assert_eq!(chat.sum, "3 × 30s + 100ms + 200ms");
    assert_eq!(chat.bound, ms(10_000));
}

/// `index_document` (the crate's example): 3 attempts of at most 2 s, backoff ceilings 50 ms then 100 ms:
/// 3 × 2 s + 0.05 s + 0.1 s = 6.15 s without propagation. It is deferred, so it runs after the
/// response under its own 5 s deadline (the request's 10 s does not apply): 5 s.
#[test]
fn deferred_work_is_bounded_by_its_own_deadline() {
    let [index] = explain(
        "request { deadline = 10s }\n\
         retry transient { attempts = 3; backoff = full_jitter(base = 50ms, cap = 1s); attempt_timeout = 2s }\n\
         operation index_document: deferred, idempotent { retry = transient; deadline = 5s }\n",
    )
    .try_into()
    .unwrap();
    assert_eq!(index.bound_without_propagation, ms(6_150));
    assert_eq!(index.bound, ms(5_000));
}

/// Retries that fit: 4 attempts of at most 100 ms, backoff ceilings 10, 20 and 25 ms (capped):
/// 400 + 10 + 20 + 25 = 455 ms, under both the 1 s operation and the 2 s request deadline, so
/// the bound is 455 ms either way.
#[test]
fn retries_that_fit_are_bounded_by_their_own_sum() {
    let [read] = explain(
        "request { deadline = 2s }\n\
         retry quick { attempts = 4; backoff = full_jitter(base = 10ms, cap = 25ms); attempt_timeout = 100ms }\n\
         operation read_cache: critical, idempotent { retry = quick; deadline = 1s }\n",
    )
    .try_into()
    .unwrap();
    assert_eq!(read.bound_without_propagation, ms(455));
    assert_eq!(read.bound, ms(455));
}

#[test]
fn nothing_bounds_an_operation_without_any_deadline() {
    let [op] = explain("operation render: critical {}\n")
        .try_into()
        .unwrap();
    assert_eq!(op.bound, None);
    assert_eq!(op.bound_without_propagation, None);
    assert!(op.to_string().contains("unbounded"));
}

#[test]
fn the_chain_runs_in_the_runtime_order() {
    let [op] = explain(
        "request { deadline = 10s }\n\
         breaker b { open_after = 5 failures within 30s; cooldown = 20s }\n\
         bulkhead b { max_concurrent = 4; max_queued = 8 }\n\
         retry r { attempts = 2; backoff = full_jitter(base = 50ms, cap = 1s); attempt_timeout = 1s }\n\
         ratelimit l { 100 per 1m; on_timeout = open; on_error = closed }\n\
         operation charge: critical, idempotent { breaker = b; bulkhead = b; retry = r; ratelimit = l; deadline = 3s }\n",
    )
    .try_into()
    .unwrap();
    let kinds: Vec<&str> = op
        .steps
        .iter()
        .map(|step| match step {
            Step::Shed { .. } => "shed",
            Step::RateLimit { .. } => "ratelimit",
            Step::Retry { .. } => "retry",
            Step::BreakerCheck { .. } => "breaker",
            Step::BulkheadPermit { .. } => "bulkhead",
            Step::Run { .. } => "run",
            Step::RecordOutcome { .. } => "record",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "shed",
            "ratelimit",
            "retry",
            "breaker",
            "bulkhead",
            "run",
            "record"
        ]
    );
    let text = op.to_string();
    assert!(text.contains("  3. retry `r`"), "{text}");
    assert!(
        text.contains("     a. breaker `b`: refuse while open"),
        "{text}"
    );
    assert!(
        text.contains("     d. breaker `b`: record the outcome"),
        "{text}"
    );
}

/// What the attributes also say (`fallback_on_failure`, `poll_budget`, `#[isolate]`'s pool) and
/// what the runtime can do (a local rate when the limiter's store fails, a cap on `Retry-After`)
/// are in the model, so `explain` shows them.
#[test]
fn every_setting_of_the_model_is_explained() {
    let [feed, sign_up, resize] = explain(
        "request { deadline = 2s }\n\
         breaker b { open_after = 5 failures within 30s; cooldown = 20s; max_retry_after = 2m }\n\
         ratelimit l { 100 per 1m; on_timeout = open; on_error = local; local_rate = 20 per 1m }\n\
         operation feed: critical { breaker = b; fallback = \"cached_feed\"; fallback_on_failure; stale_if_error = 30s; poll_budget = 10ms }\n\
         operation sign_up: critical { ratelimit = l }\n\
         operation resize: critical { isolate = rayon(max_concurrent = 2, max_queued = 4) }\n",
    )
    .try_into()
    .unwrap();
    let [embed, undeclared] = explain(
        "queue embeddings { max_len = 300; visibility_timeout = 1m; max_deliveries = 2; task_deadline = 20s; concurrency = 8 }\n\
         operation embed: background, idempotent { queue = embeddings; deadline = 30s }\n\
         operation thumbnail: background, idempotent { queue = thumbnails }\n",
    )
    .try_into()
    .unwrap();
    assert_eq!(
        embed.steps.first(),
        Some(&Step::Enqueue {
            queue: "embeddings".to_owned(),
            declared: true,
            max_len: 300,
            visibility_timeout: Duration::from_secs(60),
            max_deliveries: 2,
            task_deadline: Duration::from_secs(20),
            concurrency: 8,
        }),
        "enqueued first with the stanza's numbers, the rest run by a worker"
    );
    let text = embed.to_string();
    for part in [
        "queue `embeddings`: enqueue the arguments",
        "at most 300 unfinished tasks",
        "8 at once per instance, each delivery within 20s, claimed again after 1m unacknowledged, dead-lettered after 2 deliveries)",
    ] {
        assert!(text.contains(part), "{part}: {text}");
    }
    assert_eq!(
        undeclared.steps.first(),
        Some(&Step::Enqueue {
            queue: "thumbnails".to_owned(),
            declared: false,
            max_len: 10_000,
            visibility_timeout: Duration::from_secs(30),
            max_deliveries: 5,
            task_deadline: Duration::from_secs(10),
            concurrency: 4,
        }),
        "an undeclared queue: the runtime's defaults"
    );
    assert!(
        undeclared
            .to_string()
            .contains("the runtime's defaults: no `queue` stanza declares it"),
        "{undeclared}"
    );
    let text = feed.to_string();
    for part in [
        "breaker `b`: refuse while open (a `Retry-After` opens it for at most 2m)",
        "run within what remains of 2s; a poll longer than 10ms is reported as blocking its worker",
        "  5. when refused, expired or failed: the last good result, if at most 30s old; otherwise when refused, expired or failed: answered by `cached_feed`",
    ] {
        assert!(text.contains(part), "{part:?} in\n{text}");
    }
    let text = sign_up.to_string();
    assert!(
        text.contains("when it is down: local (locally: 20 per 1m on each instance)"),
        "{text}"
    );
    assert_eq!(
        resize.steps,
        [Step::Isolate {
            pool: velocity_policy_lang::PoolKind::Rayon,
            max_concurrent: Some(2),
            max_queued: Some(4),
        }]
    );
    let text = resize.to_string();
    assert!(
        text.contains("isolate: run on the `rayon` pool (2 at once, 4 queued, refuse past that)"),
        "{text}"
    );
}

/// A hedge after 50 ms with `max = 2`: without propagation an attempt ends by its 800 ms timeout
/// after the 50 ms hedge delay, 2 × (800 ms + 50 ms) + 100 ms = 1.8 s; the 1 s deadline bounds
/// every hedge with the rest.
#[test]
fn a_hedge_adds_its_delay_to_each_attempt_without_propagation() {
    let [search] = explain(
        "retry quick { attempts = 2; backoff = full_jitter(base = 100ms, cap = 1s); attempt_timeout = 800ms }\n\
         hedge tail { after = 50ms; max = 2 }\n\
         operation search: critical, idempotent { retry = quick; hedge = tail; deadline = 1s }\n",
    )
    .try_into()
    .unwrap();
    assert_eq!(search.bound_without_propagation, ms(1_800));
    assert_eq!(search.sum, "2 × (800ms + 50ms) + 100ms");
    assert_eq!(search.bound, ms(1_000));
    assert!(search.steps.iter().any(|step| matches!(
        step,
        Step::Hedge { max: 2, shares_with: Some(retry), .. } if retry == "quick"
    )));
    let text = search.to_string();
    assert!(
        text.contains("hedge `tail`: another attempt after 50ms without an answer, at most 2 in flight; the first answer wins, the others are dropped; hedges draw from retry `quick`'s allowance; each attempt:"),
        "{text}"
    );
    assert!(text.contains("     b. deadline"), "{text}");
}

/// A percentile delay has no fixed value: the runtime never starts a hedge whose delay ends
/// past the deadline, so each of the `max - 1` hedges counts as the whole 300 ms:
/// 1 × (300 ms + 2 × 300 ms) = 900 ms alone, 300 ms with propagation.
#[test]
fn a_percentile_hedge_counts_as_the_attempt_timeout() {
    let [read] = explain(
        "hedge tail { after = p95; max = 3; allowance = 10% + 5/s }\n\
         operation read: critical, idempotent { hedge = tail; deadline = 300ms }\n",
    )
    .try_into()
    .unwrap();
    assert_eq!(read.bound_without_propagation, ms(900));
    assert_eq!(read.sum, "1 × (300ms + 2 × 300ms for p95)");
    assert_eq!(read.bound, ms(300));
    let text = read.to_string();
    assert!(
        text.contains("the operation's p95 latency without an answer, at most 3 in flight")
            && text.contains("an allowance of 10% + 5/s"),
        "{text}"
    );
}

/// An adaptive bulkhead is explained with its bounds: the count it admits moves between them.
#[test]
fn an_adaptive_bulkhead_is_explained_with_its_bounds() {
    let [call] = explain(
        "bulkhead partners { adaptive(min = 4, max = 64); max_queued = 8 }\n\
         operation call_partner: critical { bulkhead = partners; deadline = 1s }\n",
    )
    .try_into()
    .unwrap();
    assert!(call.steps.contains(&Step::BulkheadPermit {
        name: "partners".to_owned(),
        max_concurrent: 64,
        max_queued: 8,
        adaptive_min: Some(4),
    }));
    let text = call.to_string();
    assert!(
        text.contains("bulkhead `partners`: take a permit (between 4 and 64 at once, following the dependency's latency; 8 queued, refuse past that)"),
        "{text}"
    );
}
