//! Assertions on tokio's paused clock, for your own annotated functions.
//!
//! Each helper drives calls you give it (a closure calling your `#[velocity_policy::resilient]`,
//! `#[velocity_policy::critical]`... function), reads what the mechanisms did from the registry
//! (`Registry::global()`: the test's own under [`isolate`](crate::isolation::isolate)) rather
//! than guessing from the results, and returns a report of the numbers it saw. When the
//! mechanism does not do what the helper asserts, it panics with a message naming what failed,
//! the numbers seen and the fix.
//!
//! | helper | asserts |
//! |---|---|
//! | [`breaker_opens_after`] | the breaker opens after exactly N failures inside its window, not after failures spread wider, and then refuses |
//! | [`no_call_outlives`] | no call, run under a request deadline, takes longer than the deadline |
//! | [`retries_within_budget`] | attempts per call stay within the retry policy's attempts, and retries within its allowance |
//! | [`critical_never_shed`] | under the load that sheds deferred work, every critical call is admitted |
//!
//! Every helper needs the paused clock (`#[tokio::test(start_paused = true)]`, with tokio's
//! `test-util` feature): windows, cooldowns and deadlines then pass in no real time, and the
//! elapsed times measured are exact. A helper run on a running clock panics saying so.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;
use velocity_policy_runtime::breaker::BreakerState;
use velocity_policy_runtime::retry::RetrySnapshot;
use velocity_policy_runtime::{Breaker, Deadline, OpenAfter, Registry};

/// Panics unless tokio's clock is paused: the helpers' windows and deadlines would otherwise
/// take real time, and their measurements would not be exact.
fn require_paused_clock(helper: &str) {
    let before = Instant::now();
    std::thread::sleep(Duration::from_millis(2));
    if Instant::now() > before {
        panic!(
            "{helper}: tokio's clock is running, so windows and deadlines would pass in real time \
             and the elapsed times would not be exact. Fix: run the test on the paused clock, \
             `#[tokio::test(start_paused = true)]` (tokio's `test-util` feature)"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The breaker opens after N failures in its window.

/// What [`breaker_opens_after`] saw.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct BreakerReport {
    /// The breaker's name.
    pub breaker: String,
    /// Its rule, as built.
    pub rule: OpenAfter,
    /// Failures, all inside the window, after which it opened.
    pub opened_after: u32,
    /// Failures made before the window passed, which did not open it (`failures - 1`).
    pub spread_failures: u32,
    /// Calls refused once it was open (the helper makes one).
    pub refused_after_opening: u64,
    /// How long it stays open from the opening (its cooldown).
    pub open_for: Option<Duration>,
}

/// The breaker `name`, or the one breaker whose name ends with `::name` (an inline breaker is
/// named after its function's path: `my_crate::search::lookup`).
fn find_breaker(name: &str) -> Option<Breaker> {
    let registry = Registry::global();
    let names = registry.snapshot().breakers.into_iter().map(|b| b.name);
    registry.find_breaker(&resolve(name, names)?)
}

/// `name` if it is one of `names`, or the one name among them ending with `::name`.
fn resolve(name: &str, names: impl Iterator<Item = Arc<str>>) -> Option<Arc<str>> {
    let suffix = format!("::{name}");
    let mut matching = names.filter(|n| &**n == name || n.ends_with(&suffix));
    let first = matching.next()?;
    if &*first == name {
        return Some(first);
    }
    match matching.next() {
        Some(exact) if &*exact == name => Some(exact),
        Some(_) => None,
        None => Some(first),
    }
}

/// One call, and what the breaker `name` counted of it: (failures added, now open).
async fn counted_call<F, Fut>(name: &str, call: &mut F) -> (u64, bool)
where
    F: FnMut() -> Fut,
    Fut: Future,
{
    let before = find_breaker(name).map_or(0, |b| b.snapshot().failures);
    let _ = call().await;
    let Some(breaker) = find_breaker(name) else {
        panic!(
            "breaker_opens_after: the calls never used a breaker named `{name}` (the registry has \
             {:?}). Fix: pass the name the function's attribute or `.policy` operation gives its \
             breaker (`#[velocity_policy::resilient(breaker = \"{name}\")]`), and call that function in \
             the closure",
            Registry::global()
                .snapshot()
                .breakers
                .iter()
                .map(|b| b.name.to_string())
                .collect::<Vec<_>>()
        );
    };
    if let OpenAfter::FailureRatio {
        ratio,
        min_calls,
        window,
    } = breaker.config().open_after
    {
        panic!(
            "breaker_opens_after: breaker `{name}` opens on a failure ratio ({:.0}% of at least \
             {min_calls} calls within {window:?}), not after a count of failures. Fix: assert \
             it with calls that succeed and fail in that ratio, reading \
             `Registry::global().find_breaker(\"{name}\")`; this helper checks count rules",
            ratio * 100.0
        );
    }
    let after = breaker.snapshot().failures;
    (after - before, breaker.state() == BreakerState::Open)
}

/// `breaker` is the breaker's name, or its function's for an inline `breaker(..)` (named by the
/// function's path; the last segment finds it when only one breaker ends with it).
///
/// Asserts that the breaker `breaker` opens after exactly `failures` failures inside `window`,
/// and not after failures spread over more than the window; then that it refuses the next
/// call. `call` makes one call that fails (your annotated function, calling a dependency that
/// fails or is too slow for the attempt's deadline).
///
/// First `failures - 1` failing calls, which must leave it closed; then the window passes on
/// the paused clock (those failures slide out); then failing calls until it opens, which must
/// take exactly `failures`, and one more call, which it must refuse.
///
/// ```
/// use std::time::Duration;
/// use velocity_policy_testkit::assert::breaker_opens_after;
/// # #[derive(Debug)] struct Down;
/// # impl From<velocity_policy::ResilienceError> for Down { fn from(_: velocity_policy::ResilienceError) -> Self { Down } }
/// # impl From<velocity_policy::DeadlineExceeded> for Down { fn from(_: velocity_policy::DeadlineExceeded) -> Self { Down } }
///
/// // `breaker lookup { open_after = 3 failures within 10s; cooldown = 5s }` in the crate's
/// // policies/ (an inline `breaker(failures = 3, ..)` works too: it is named after the function).
/// #[velocity_policy::resilient(breaker = "lookup")]
/// async fn lookup() -> Result<u32, Down> {
///     Err(Down) // the dependency is down
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// // #[tokio::test(start_paused = true)] async fn the_lookup_breaker_opens() {
/// let _test = velocity_policy_testkit::isolation::isolate();
/// let report = breaker_opens_after("lookup", 3, Duration::from_secs(10), lookup).await;
/// assert_eq!(report.open_for, Some(Duration::from_secs(5)));
/// # }
/// ```
///
/// # Panics
///
/// When no breaker of that name was used, it opens on a failure ratio (this helper checks count
/// rules: `failures = N, within = ".."`), a call did not fail, or the breaker opened after
/// another number of failures, counted a wider window, or did not refuse once open.
pub async fn breaker_opens_after<F, Fut>(
    breaker: &str,
    failures: u32,
    window: Duration,
    mut call: F,
) -> BreakerReport
where
    F: FnMut() -> Fut,
    Fut: Future,
{
    require_paused_clock("breaker_opens_after");
    let failures = failures.max(1);
    let rule = |name: &str| {
        find_breaker(name)
            .map(|b| format!("{:?}", b.config().open_after))
            .unwrap_or_default()
    };
    let fix = |name: &str| {
        format!(
            "Fix: make the breaker's rule `{failures} failures within {window:?}` \
             (`breaker(failures = {failures}, within = \"..\")` on the attribute, \
             `open_after = {failures} failures within ..` in the `.policy` file), or assert the \
             rule it has: {}",
            rule(name)
        )
    };
    let mut spread = 0;
    for n in 1..failures {
        let (added, open) = counted_call(breaker, &mut call).await;
        if added == 0 && !open {
            panic!(
                "breaker_opens_after: call {n} did not fail (breaker `{breaker}` counted no \
                 failure). Fix: the closure must call a dependency that fails, or one slow enough \
                 to outlive the attempt's deadline"
            );
        }
        if open {
            panic!(
                "breaker_opens_after: breaker `{breaker}` opened after {n} failures, expected \
                 {failures}. {}",
                fix(breaker)
            );
        }
        spread += 1;
    }
    // The window passes: the failures so far slide out of it.
    if spread > 0 {
        tokio::time::sleep(window + Duration::from_millis(1)).await;
    }
    let mut inside = 0;
    loop {
        let (added, open) = counted_call(breaker, &mut call).await;
        if added == 0 && !open {
            panic!(
                "breaker_opens_after: a call after the window did not fail (breaker `{breaker}` \
                 counted no failure, {inside} so far). Fix: the closure must call a dependency \
                 that fails every time"
            );
        }
        inside += 1;
        if open {
            break;
        }
        if inside >= failures {
            panic!(
                "breaker_opens_after: breaker `{breaker}` was still closed after {inside} failures \
                 within {window:?}, expected it to open at {failures}. {}",
                fix(breaker)
            );
        }
    }
    if inside < failures {
        panic!(
            "breaker_opens_after: breaker `{breaker}` opened after {inside} failures once the \
             window of {window:?} had passed, expected {failures}: the {spread} failures made \
             before it still counted, so its window is longer than {window:?}. {}",
            fix(breaker)
        );
    }
    let Some(opened) = find_breaker(breaker) else {
        unreachable!("found by counted_call")
    };
    let refusals = opened.snapshot().refusals;
    let _ = call().await;
    let after = opened.snapshot();
    let refused = after.refusals - refusals;
    if refused == 0 {
        panic!(
            "breaker_opens_after: breaker `{breaker}` opened, but the next call was not refused \
             by it (state now {:?}). Fix: the closure must call the function the breaker guards",
            after.state
        );
    }
    BreakerReport {
        breaker: breaker.to_owned(),
        rule: opened.config().open_after,
        opened_after: inside,
        spread_failures: spread,
        refused_after_opening: refused,
        open_for: Some(opened.config().cooldown),
    }
}

// ---------------------------------------------------------------------------------------------
// No call outlives the request deadline.

/// What [`no_call_outlives`] saw.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct DeadlineReport {
    /// The request deadline each call ran under.
    pub deadline: Duration,
    /// How long each call took, on the paused clock, in order.
    pub elapsed: Vec<Duration>,
    /// The longest.
    pub max: Duration,
}

/// How much longer than its deadline a call may take: the paused clock's own rounding (a
/// timer fires on the millisecond after its instant).
pub const DEADLINE_TOLERANCE: Duration = Duration::from_millis(1);

/// Runs `calls` calls one after another, each inside a request deadline of `deadline` (what
/// the `DeadlineLayer` stamps per request: every annotated function takes a child of it), and
/// asserts that none took longer than the deadline (plus [`DEADLINE_TOLERANCE`]) on the paused
/// clock: however slow the dependency, the caller waited at most that long.
///
/// ```
/// use std::time::Duration;
/// use velocity_policy_testkit::assert::no_call_outlives;
/// # #[derive(Debug)] struct Slow;
/// # impl From<velocity_policy::ResilienceError> for Slow { fn from(_: velocity_policy::ResilienceError) -> Self { Slow } }
/// # impl From<velocity_policy::DeadlineExceeded> for Slow { fn from(_: velocity_policy::DeadlineExceeded) -> Self { Slow } }
///
/// #[velocity_policy::critical(deadline = "2s")]
/// async fn render() -> Result<(), Slow> {
///     tokio::time::sleep(Duration::from_secs(30)).await; // a dependency that hangs
///     Ok(())
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let report = no_call_outlives(Duration::from_millis(300), 3, render).await;
/// assert_eq!(report.max, Duration::from_millis(300)); // the request's, tighter than the 2s
/// # }
/// ```
///
/// # Panics
///
/// When a call took longer than the deadline.
pub async fn no_call_outlives<F, Fut>(
    deadline: Duration,
    calls: usize,
    mut call: F,
) -> DeadlineReport
where
    F: FnMut() -> Fut,
    Fut: Future,
{
    require_paused_clock("no_call_outlives");
    let mut elapsed = Vec::with_capacity(calls);
    for _ in 0..calls {
        let started = Instant::now();
        let _ = Deadline::after(deadline).scope(call()).await;
        elapsed.push(started.elapsed());
    }
    let max = elapsed.iter().copied().max().unwrap_or_default();
    if max > deadline + DEADLINE_TOLERANCE {
        let over = elapsed
            .iter()
            .filter(|e| **e > deadline + DEADLINE_TOLERANCE)
            .count();
        panic!(
            "no_call_outlives: {over} of {calls} calls outlived the request deadline of \
             {deadline:?}: the longest took {max:?} (all: {elapsed:?}). Fix: put the function \
             under `#[velocity_policy::critical]` or `#[velocity_policy::resilient]` (each takes a child of the \
             request's deadline), and have hand-written waits take \
             `Deadline::child_of_current(..).run(..)` instead of a timeout of their own"
        );
    }
    DeadlineReport {
        deadline,
        elapsed,
        max,
    }
}

// ---------------------------------------------------------------------------------------------
// Retries stay within the budget.

/// Counts attempts at a dependency: hand a clone to the fake (or closure) your function calls,
/// and call [`hit`](Self::hit) once per attempt it receives.
#[derive(Debug, Clone, Default)]
pub struct Attempts(Arc<AtomicU64>);

impl Attempts {
    /// A counter at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// One attempt reached the dependency.
    pub fn hit(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// Attempts so far.
    pub fn count(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// What [`retries_within_budget`] saw.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RetryReport {
    /// The retry policy's name.
    pub retry: String,
    /// Calls made.
    pub calls: usize,
    /// Attempts the dependency received, per call.
    pub attempts: Vec<u64>,
    /// Attempts the policy allows per call.
    pub max_attempts: u32,
    /// Retries in all (attempts beyond the first of each call).
    pub retries: u64,
    /// Retries the allowance allows for these calls, as the policy's snapshot states it.
    pub allowed: u64,
    /// Retries the policy did not make because the allowance was spent.
    pub stopped_by_allowance: u64,
}

fn retry_snapshot(name: &str) -> Option<RetrySnapshot> {
    let retries = Registry::global().snapshot().retries;
    let name = resolve(name, retries.iter().map(|r| r.name.clone()))?;
    retries.into_iter().find(|r| r.name == name)
}

/// `retry` is the policy's name, or its function's for an inline `retry(..)` (the registry
/// names it by the function's path: `my_crate::fetch`; the last segment finds it).
///
/// Makes `calls` calls one after another and asserts that the dependency counted by `attempts`
/// received no more attempts per call than the retry policy `retry` allows, that the retries in
/// all stayed within the policy's allowance (its `R% + N/s` over its window), and that the
/// policy counted the retries the dependency saw (no hidden retry loop besides it).
///
/// ```
/// use std::time::Duration;
/// use velocity_policy_testkit::assert::{Attempts, retries_within_budget};
/// # #[derive(Debug)] struct Flaky;
/// # impl From<velocity_policy::ResilienceError> for Flaky { fn from(_: velocity_policy::ResilienceError) -> Self { Flaky } }
/// # impl From<velocity_policy::DeadlineExceeded> for Flaky { fn from(_: velocity_policy::DeadlineExceeded) -> Self { Flaky } }
/// # impl velocity_policy::Transient for Flaky { fn is_transient(&self) -> bool { true } }
///
/// #[velocity_policy::resilient(retry(attempts = 3, base = "10ms", cap = "100ms"), deadline = "1s")]
/// #[velocity_policy::idempotent]
/// async fn fetch(dependency: Attempts) -> Result<(), Flaky> {
///     dependency.hit();
///     Err(Flaky) // always fails: every retry is spent
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let _test = velocity_policy_testkit::isolation::isolate();
/// let dependency = Attempts::new();
/// // An inline retry policy is named after its function.
/// let report = retries_within_budget("fetch", 20, &dependency, || fetch(dependency.clone())).await;
/// assert!(report.attempts.iter().all(|a| *a <= 3));
/// # }
/// ```
///
/// # Panics
///
/// When no retry policy of that name was used, a call received more attempts than the policy
/// allows, the retries exceeded the allowance, or the dependency saw retries the policy did not
/// make.
pub async fn retries_within_budget<F, Fut>(
    retry: &str,
    calls: usize,
    attempts: &Attempts,
    mut call: F,
) -> RetryReport
where
    F: FnMut() -> Fut,
    Fut: Future,
{
    require_paused_clock("retries_within_budget");
    let before = retry_snapshot(retry);
    let mut per_call = Vec::with_capacity(calls);
    for _ in 0..calls {
        let seen = attempts.count();
        let _ = call().await;
        per_call.push(attempts.count() - seen);
    }
    let Some(after) = retry_snapshot(retry) else {
        panic!(
            "retries_within_budget: the calls never used a retry policy named `{retry}` (the \
             registry has {:?}). Fix: pass the name of the function's retry policy (`retry = \
             \"{retry}\"`, or the function's own name for an inline `retry(..)`)",
            Registry::global()
                .snapshot()
                .retries
                .iter()
                .map(|r| r.name.to_string())
                .collect::<Vec<_>>()
        );
    };
    let policy_retries = after.retries - before.as_ref().map_or(0, |b| b.retries);
    let total: u64 = per_call.iter().sum();
    let retries = total.saturating_sub(per_call.iter().filter(|a| **a > 0).count() as u64);
    let max_attempts = after.attempts;
    if let Some((n, most)) = per_call
        .iter()
        .enumerate()
        .find(|(_, a)| **a > u64::from(max_attempts))
    {
        panic!(
            "retries_within_budget: call {} reached the dependency {most} times, but retry policy \
             `{retry}` allows {max_attempts} attempts per call (all calls: {per_call:?}). Fix: \
             remove the retry loop around or inside the function: retries belong to the policy, \
             which bounds them by its attempts, its allowance and the deadline",
            n + 1
        );
    }
    if retries > policy_retries {
        panic!(
            "retries_within_budget: the dependency saw {retries} retries, but retry policy \
             `{retry}` made {policy_retries}: something else retries too (per call: \
             {per_call:?}). Fix: remove the hand-written retry; let the policy do it"
        );
    }
    let allowed = after.allowance.allowed;
    if after.allowance.retries > allowed {
        panic!(
            "retries_within_budget: retry policy `{retry}` spent {} retries, but its allowance \
             allows {allowed} for {} calls in its window. Fix: this is the policy's promise \
             broken: report it with the numbers",
            after.allowance.retries, after.allowance.calls
        );
    }
    RetryReport {
        retry: retry.to_owned(),
        calls,
        attempts: per_call,
        max_attempts,
        retries,
        allowed,
        stopped_by_allowance: after.stopped_by_allowance
            - before.as_ref().map_or(0, |b| b.stopped_by_allowance),
    }
}

// ---------------------------------------------------------------------------------------------
// Critical work is never shed.

/// What [`critical_never_shed`] saw.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ShedReport {
    /// The bulkhead whose load was driven.
    pub bulkhead: String,
    /// Its load while the calls were made.
    pub load: f64,
    /// Deferred (and background) calls shed for load: proof the load was high enough.
    pub optional_shed: u64,
    /// Critical calls made.
    pub critical_calls: usize,
    /// Calls of the critical closure shed (for load or budget, whatever their class): 0.
    pub critical_shed: u64,
    /// Critical calls the bulkhead refused because it was full: 0.
    pub critical_refused_full: u64,
}

/// Calls shed so far: (deferred and background for load, every class for any reason).
fn shed_counts() -> (u64, u64) {
    let snapshot = Registry::global().snapshot();
    let optional = snapshot
        .shedders
        .iter()
        .map(|s| s.shed_load.deferred + s.shed_load.background)
        .sum();
    let any = snapshot
        .shedders
        .iter()
        .map(|s| {
            let (load, budget) = (s.shed_load, s.shed_budget);
            load.critical
                + load.deferred
                + load.background
                + budget.critical
                + budget.deferred
                + budget.background
        })
        .sum();
    (optional, any)
}

/// Drives the bulkhead `bulkhead` to the load at which optional work is shed (every slot but
/// one held), makes `calls` calls of `optional` (a deferred or background function behind that
/// bulkhead), which must be shed, then `calls` calls of `critical` (a critical function behind
/// it), and asserts that every critical call was admitted: none shed, none refused for a full
/// bulkhead.
///
/// ```
/// use velocity_policy_testkit::assert::critical_never_shed;
/// # #[derive(Debug)] struct E;
/// # impl std::fmt::Display for E { fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("e") } }
/// # impl From<velocity_policy::ResilienceError> for E { fn from(_: velocity_policy::ResilienceError) -> Self { E } }
/// # impl From<velocity_policy::DeadlineExceeded> for E { fn from(_: velocity_policy::DeadlineExceeded) -> Self { E } }
///
/// // `bulkhead pool { max_concurrent = 4; max_queued = 0 }` in the crate's policies/.
/// #[velocity_policy::critical(bulkhead = "pool", deadline = "1s")]
/// async fn save() -> Result<(), E> { Ok(()) }
///
/// #[velocity_policy::deferred(bulkhead = "pool", shed_at = 0.5, deadline = "1s")]
/// #[velocity_policy::idempotent]
/// async fn analytics() -> Result<(), E> { Ok(()) }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let _test = velocity_policy_testkit::isolation::isolate();
/// // A deferred function schedules its work and returns: the closure wraps the call.
/// let report = critical_never_shed("pool", 5, save, || async { analytics() }).await;
/// assert_eq!((report.critical_shed, report.critical_refused_full), (0, 0));
/// # }
/// ```
///
/// # Panics
///
/// When no bulkhead of that name was used, the load shed no optional work (the test would
/// prove nothing), or a critical call was shed or refused.
pub async fn critical_never_shed<C, CFut, O, OFut>(
    bulkhead: &str,
    calls: usize,
    mut critical: C,
    mut optional: O,
) -> ShedReport
where
    C: FnMut() -> CFut,
    CFut: Future,
    O: FnMut() -> OFut,
    OFut: Future,
{
    require_paused_clock("critical_never_shed");
    // One of each at no load: builds their mechanisms.
    let _ = critical().await;
    let _ = optional().await;
    settle().await;
    let Some(compartment) = Registry::global().find_bulkhead(bulkhead) else {
        panic!(
            "critical_never_shed: the calls never used a bulkhead named `{bulkhead}`. Fix: pass \
             the bulkhead both functions name (`bulkhead = \"{bulkhead}\"`): its load is what the \
             shedding decision reads"
        );
    };
    let slots = compartment.max_concurrent();
    if slots < 2 {
        panic!(
            "critical_never_shed: bulkhead `{bulkhead}` has {slots} slot(s); the helper holds all \
             but one to make the load, so it needs at least 2. Fix: test with a bulkhead of 2 or \
             more slots"
        );
    }
    let mut held = Vec::new();
    while compartment.running() + 1 < slots {
        match compartment.try_acquire_owned() {
            Ok(permit) => held.push(permit),
            Err(_) => break,
        }
    }
    let load = compartment.load();
    let (optional_before, _) = shed_counts();
    for _ in 0..calls {
        let _ = optional().await;
    }
    settle().await;
    let (optional_after, _) = shed_counts();
    let optional_shed = optional_after - optional_before;
    if optional_shed == 0 {
        panic!(
            "critical_never_shed: at load {load:.2} on bulkhead `{bulkhead}`, none of {calls} \
             optional calls was shed, so the test proves nothing. Fix: pass a deferred or \
             background function behind bulkhead `{bulkhead}` whose `shed_at` is at or below \
             {load:.2}"
        );
    }
    let refused_before = compartment.snapshot().refused_full;
    let (_, critical_before) = shed_counts();
    for _ in 0..calls {
        let _ = critical().await;
    }
    settle().await;
    // Only critical calls run now: whatever is shed is one of them.
    let (_, critical_after) = shed_counts();
    let critical_shed = critical_after - critical_before;
    let critical_refused_full = compartment.snapshot().refused_full - refused_before;
    drop(held);
    if critical_shed > 0 || critical_refused_full > 0 {
        panic!(
            "critical_never_shed: at load {load:.2} on bulkhead `{bulkhead}`, {critical_shed} of \
             {calls} critical calls were shed and {critical_refused_full} refused for a full \
             bulkhead. Fix: mark the function `#[velocity_policy::critical]` (critical work is never shed \
             for load), give it a deadline that covers its expected cost, and leave it a slot"
        );
    }
    ShedReport {
        bulkhead: bulkhead.to_owned(),
        load,
        optional_shed,
        critical_calls: calls,
        critical_shed,
        critical_refused_full,
    }
}

/// Lets scheduled work (deferred tasks) run its admission.
async fn settle() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}
