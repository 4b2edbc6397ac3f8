//! The contenders every bench binary shares: our mechanisms one by one, the hand-written
//! expansions of the attribute macros, and what users write instead (tower's middleware,
//! `failsafe`'s breaker, a bare `tokio::sync::Semaphore` plus `tokio::time::timeout`).
//!
//! Every contender wraps the same operation ([`Op`]): either ready at once, or waiting once
//! (one `yield_now`) before it completes. The bare call of that operation is the baseline.
#![allow(
    dead_code,
    reason = "each bench binary drives a different subset of the contenders"
)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "bench code: a failed setup is a failed run"
)]

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};
use velocity_policy::WorkClass;
use velocity_policy::{Breaker, Bulkhead, CallError, Deadline, Idempotent, RetryPolicy, Shedder};

/// The request's budget: long enough never to expire during a bench.
pub(crate) const REQUEST_BUDGET: Duration = Duration::from_secs(3600);
/// What a call site asks of it (`#[resilient]`'s deadline, `#[critical]`'s deadline).
pub(crate) const CALL_MAX: Duration = Duration::from_secs(2);
/// Each attempt's own timeout, and the timeout the alternatives use.
pub(crate) const ATTEMPT_MAX: Duration = Duration::from_secs(1);
/// The minimum useful budget an operation requires.
pub(crate) const MIN_BUDGET: Duration = Duration::from_millis(10);
/// Slots of every bulkhead, semaphore and concurrency limit: never the limiting factor here.
pub(crate) const SLOTS: u32 = 64;

/// The operation being protected: a trivial async call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// Ready on its first poll.
    Ready,
    /// Returns `Pending` once (a `yield_now`), then completes.
    WaitsOnce,
}

impl Op {
    pub(crate) const ALL: [Op; 2] = [Op::Ready, Op::WaitsOnce];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::Ready => "ready",
            Op::WaitsOnce => "waits_once",
        }
    }

    #[inline]
    pub(crate) async fn run(self, x: u64) -> Result<u64, std::io::Error> {
        if self == Op::WaitsOnce {
            tokio::task::yield_now().await;
        }
        Ok(x.wrapping_add(1))
    }
}

/// Our mechanisms, each built once, as an application builds them at startup.
#[derive(Debug)]
pub(crate) struct Ours {
    pub(crate) breaker: Breaker,
    pub(crate) bulkhead: Bulkhead,
    pub(crate) retry: RetryPolicy,
    pub(crate) shedder: Shedder,
}

impl Ours {
    pub(crate) fn new() -> Self {
        Self {
            breaker: Breaker::builder("bench").build(),
            bulkhead: Bulkhead::builder("bench").max_concurrent(SLOTS).build(),
            retry: RetryPolicy::builder("bench")
                .attempt_timeout(ATTEMPT_MAX)
                .build(),
            shedder: Shedder::new("bench"),
        }
    }

    /// Breaker check, the call, and the outcome recorded.
    #[inline]
    pub(crate) async fn breaker(&self, op: Op, x: u64) -> Result<u64, CallError<std::io::Error>> {
        self.breaker.check()?;
        match op.run(x).await {
            Ok(v) => {
                self.breaker.record_success();
                Ok(v)
            }
            Err(e) => {
                self.breaker.record_failure();
                Err(CallError::Failed(e))
            }
        }
    }

    /// A bulkhead permit held across the call.
    #[inline]
    pub(crate) async fn bulkhead(
        &self,
        request: &Deadline,
        op: Op,
        x: u64,
    ) -> Result<u64, CallError<std::io::Error>> {
        let _slot = self.bulkhead.acquire(request).await?;
        op.run(x).await.map_err(CallError::Failed)
    }

    /// A child deadline and `run`.
    #[inline]
    pub(crate) async fn deadline(
        &self,
        request: &Deadline,
        op: Op,
        x: u64,
    ) -> Result<u64, CallError<std::io::Error>> {
        request
            .child(ATTEMPT_MAX)
            .run(op.run(x))
            .await?
            .map_err(CallError::Failed)
    }

    /// The shedding decision (for deferred work, so the load rule is evaluated too).
    #[inline]
    pub(crate) async fn shedding(
        &self,
        request: &Deadline,
        op: Op,
        x: u64,
    ) -> Result<u64, CallError<std::io::Error>> {
        self.shedder.admit(
            WorkClass::Deferred,
            self.bulkhead.load(),
            request,
            Duration::from_millis(1),
        )?;
        op.run(x).await.map_err(CallError::Failed)
    }

    /// A retry loop whose first attempt succeeds.
    #[inline]
    pub(crate) async fn retry(
        &self,
        request: &Deadline,
        op: Op,
        x: u64,
    ) -> Result<u64, CallError<std::io::Error>> {
        velocity_policy::retry_within(
            request,
            &self.retry,
            Idempotent::claim(|_attempt| async move { op.run(x).await.map_err(CallError::Failed) }),
        )
        .await
    }

    /// Breaker and bulkhead around a deadline: what tower's `ConcurrencyLimit` + `Timeout`
    /// does, plus the breaker. The contention bench's main contender.
    #[inline]
    pub(crate) async fn breaker_bulkhead_deadline(
        &self,
        request: &Deadline,
        op: Op,
        x: u64,
    ) -> Result<u64, CallError<std::io::Error>> {
        self.breaker.check()?;
        let _slot = self.bulkhead.acquire(request).await?;
        match request.child(ATTEMPT_MAX).run(op.run(x)).await {
            Ok(Ok(v)) => {
                self.breaker.record_success();
                Ok(v)
            }
            Ok(Err(e)) => {
                self.breaker.record_failure();
                Err(CallError::Failed(e))
            }
            Err(expired) => {
                self.breaker.record_failure();
                Err(expired.into())
            }
        }
    }
}

impl Ours {
    /// The same with [`Bulkhead::try_acquire`], the bulkhead's synchronous fast path. For a
    /// bulkhead without a queue (the default) it admits and refuses exactly as `acquire` does;
    /// it shows what an `acquire` whose admitted path is not an `async fn` would cost.
    #[inline]
    pub(crate) async fn breaker_try_bulkhead_deadline(
        &self,
        request: &Deadline,
        op: Op,
        x: u64,
    ) -> Result<u64, CallError<std::io::Error>> {
        self.breaker.check()?;
        let _slot = self.bulkhead.try_acquire()?;
        match request.child(ATTEMPT_MAX).run(op.run(x)).await {
            Ok(Ok(v)) => {
                self.breaker.record_success();
                Ok(v)
            }
            Ok(Err(e)) => {
                self.breaker.record_failure();
                Err(CallError::Failed(e))
            }
            Err(expired) => {
                self.breaker.record_failure();
                Err(expired.into())
            }
        }
    }
}

/// The attribute macros' expansions, written by hand.
///
/// The sequences the macros expand to, as the facade's attributes guide (`velocity_policy::guide::attributes`) and `velocity-policy-macros`'
/// `expand` module document them (the runtime's `tests/alloc.rs` composes the same
/// `#[resilient]` sequence), written by hand; the macro-annotated functions are here too, side
/// by side with them, under their own bench names (`resilient_macro`, `critical_macro`).
pub(crate) mod expansion {
    use super::*;

    /// The annotated functions' error: carries a refusal and an expiry (the macros' signature
    /// rule) and says which failures are worth retrying.
    #[derive(Debug)]
    pub(crate) enum BenchError {
        Op(#[expect(dead_code, reason = "carried for the caller")] std::io::Error),
        Refused(
            #[expect(dead_code, reason = "carried for the caller")]
            velocity_policy::ResilienceError,
        ),
        Expired(
            #[expect(dead_code, reason = "carried for the caller")]
            velocity_policy::DeadlineExceeded,
        ),
    }

    impl From<velocity_policy::ResilienceError> for BenchError {
        fn from(e: velocity_policy::ResilienceError) -> Self {
            Self::Refused(e)
        }
    }

    impl From<velocity_policy::DeadlineExceeded> for BenchError {
        fn from(e: velocity_policy::DeadlineExceeded) -> Self {
            Self::Expired(e)
        }
    }

    impl velocity_policy::Transient for BenchError {
        fn is_transient(&self) -> bool {
            !matches!(self, Self::Refused(_))
        }
    }

    /// What users get from `#[velocity_policy::resilient]`: the macro's own expansion, with the same
    /// settings as [`Ours`] (64 slots, a 1 s attempt timeout, 3 attempts, a 2 s call budget).
    #[velocity_policy::resilient(
        breaker(failures = 5, within = "30s", cooldown = "20s"),
        bulkhead(max_concurrent = 64),
        retry(attempts = 3, base = "50ms", cap = "1s", attempt_timeout = "1s"),
        deadline = "2s",
        min_budget = "10ms"
    )]
    #[velocity_policy::idempotent]
    pub(crate) async fn resilient_macro(op: Op, x: u64) -> Result<u64, BenchError> {
        op.run(x).await.map_err(BenchError::Op)
    }

    /// What users get from `#[velocity_policy::critical]` with a deadline.
    #[velocity_policy::critical(deadline = "2s", min_budget = "10ms")]
    pub(crate) async fn critical_macro(op: Op, x: u64) -> Result<u64, BenchError> {
        op.run(x).await.map_err(BenchError::Op)
    }

    /// `#[resilient(breaker, bulkhead, retry)]`: the operation's deadline and minimum budget, the
    /// shedding decision, then for each attempt inside `retry_within(deadline, ..)`: breaker
    /// check, bulkhead permit, the attempt's deadline `run`, and the outcome recorded in the
    /// breaker. Must run inside a request's [`Deadline::scope`].
    #[inline]
    pub(crate) async fn resilient(
        ours: &Ours,
        op: Op,
        x: u64,
    ) -> Result<u64, CallError<std::io::Error>> {
        let deadline = Deadline::child_of_current(CALL_MAX);
        deadline.require(MIN_BUDGET, "bench")?;
        ours.shedder.admit(
            WorkClass::Critical,
            ours.bulkhead.load(),
            &deadline,
            Duration::ZERO,
        )?;
        velocity_policy::retry_within(
            &deadline,
            &ours.retry,
            Idempotent::claim(|attempt| async move {
                ours.breaker.check()?;
                let _slot = ours.bulkhead.acquire(&attempt.deadline).await?;
                match attempt.deadline.run(op.run(x)).await {
                    Ok(Ok(v)) => {
                        ours.breaker.record_success();
                        Ok(v)
                    }
                    Ok(Err(e)) => {
                        ours.breaker.record_failure();
                        Err(CallError::Failed(e))
                    }
                    Err(expired) => {
                        ours.breaker.record_failure();
                        Err(expired.into())
                    }
                }
            }),
        )
        .await
    }

    /// `#[critical]` with a deadline: a child of the current deadline, its minimum useful
    /// budget required, and the body run under it (and with it in scope).
    #[inline]
    pub(crate) async fn critical(op: Op, x: u64) -> Result<u64, CallError<std::io::Error>> {
        let deadline = Deadline::child_of_current(CALL_MAX);
        deadline.require(MIN_BUDGET, "bench")?;
        deadline
            .run(deadline.scope(op.run(x)))
            .await?
            .map_err(CallError::Failed)
    }
}

/// What-if variants of the `#[resilient]` expansion, each removing one cost the profile names,
/// so BENCHMARKS.md can say what each proposed runtime change would buy. None of them is the
/// documented sequence; they exist to measure it.
pub(crate) mod what_if {
    use super::*;

    /// The knobs: which costs to remove.
    #[derive(Debug, Clone, Copy)]
    pub(crate) struct Knobs {
        /// Check the minimum budget and the shedding budget against the fresh child's budget
        /// (no clock read for either) instead of `require` and `admit` reading the clock.
        pub(crate) fresh_budget: bool,
        /// Take the bulkhead slot with the synchronous `try_acquire` (same admission for a
        /// bulkhead without a queue).
        pub(crate) try_acquire: bool,
        /// Leave bounding the attempt to `retry_within`'s own `run` (no second `Run`, so one
        /// timer rather than two when the operation waits). A timeout then never reaches the
        /// breaker: this measures the cost, it is not a correct expansion.
        pub(crate) one_run: bool,
    }

    #[inline]
    pub(crate) async fn resilient(
        ours: &Ours,
        knobs: Knobs,
        op: Op,
        x: u64,
    ) -> Result<u64, CallError<std::io::Error>> {
        let deadline = Deadline::child_of_current(CALL_MAX);
        if knobs.fresh_budget {
            if deadline.budget() < MIN_BUDGET {
                deadline.require(MIN_BUDGET, "bench")?;
            }
            ours.shedder.admit_with_remaining(
                WorkClass::Critical,
                ours.bulkhead.load(),
                deadline.budget(),
                Duration::ZERO,
            )?;
        } else {
            deadline.require(MIN_BUDGET, "bench")?;
            ours.shedder.admit(
                WorkClass::Critical,
                ours.bulkhead.load(),
                &deadline,
                Duration::ZERO,
            )?;
        }
        velocity_policy::retry_within(
            &deadline,
            &ours.retry,
            Idempotent::claim(|attempt| async move {
                ours.breaker.check()?;
                let _slot = if knobs.try_acquire {
                    ours.bulkhead.try_acquire()?
                } else {
                    ours.bulkhead.acquire(&attempt.deadline).await?
                };
                let outcome = if knobs.one_run {
                    Ok(op.run(x).await)
                } else {
                    attempt.deadline.run(op.run(x)).await
                };
                match outcome {
                    Ok(Ok(v)) => {
                        ours.breaker.record_success();
                        Ok(v)
                    }
                    Ok(Err(e)) => {
                        ours.breaker.record_failure();
                        Err(CallError::Failed(e))
                    }
                    Err(expired) => {
                        ours.breaker.record_failure();
                        Err(expired.into())
                    }
                }
            }),
        )
        .await
    }

    /// The variants the overhead bench times, by name.
    pub(crate) const VARIANTS: [(&str, Knobs); 4] = [
        // Names are prefixed so they never collide with a contender's.
        (
            "what_if_fresh_budget",
            Knobs {
                fresh_budget: true,
                try_acquire: false,
                one_run: false,
            },
        ),
        (
            "what_if_try_acquire",
            Knobs {
                fresh_budget: false,
                try_acquire: true,
                one_run: false,
            },
        ),
        (
            "what_if_one_run",
            Knobs {
                fresh_budget: false,
                try_acquire: false,
                one_run: true,
            },
        ),
        (
            "what_if_all_three",
            Knobs {
                fresh_budget: true,
                try_acquire: true,
                one_run: true,
            },
        ),
    ];
}

/// The floor under `#[resilient]`'s admitted path: the calls into tokio, std and crossbeam it
/// makes, made alone, with none of the mechanisms' own logic and no future around them. No
/// expansion built on these parts can cost less per call than this contender; BENCHMARKS.md
/// compares it with the per-call goal.
pub(crate) mod floor {
    use std::hint::black_box;
    use std::time::Duration;

    use crossbeam_utils::atomic::AtomicCell;
    use tokio::sync::Semaphore;
    use tokio::time::Instant;

    use super::{ATTEMPT_MAX, CALL_MAX, Op, SLOTS};

    /// What the mechanisms keep: the reload cells of an operation's numbers and a retry's
    /// (crossbeam's `AtomicCell`, as the runtime's `tuning` holds them), the bulkhead's tokio
    /// semaphore, and the retry allowance's clock base.
    pub(crate) struct Parts {
        operation: AtomicCell<[u64; 2]>,
        retry: AtomicCell<[u64; 4]>,
        slots: Semaphore,
        base: Instant,
    }

    impl Parts {
        pub(crate) fn new() -> Self {
            let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
            Self {
                operation: AtomicCell::new([nanos(CALL_MAX), 10_000_000]),
                retry: AtomicCell::new([3, 50_000_000, 1_000_000_000, nanos(ATTEMPT_MAX)]),
                slots: Semaphore::new(SLOTS as usize),
                base: Instant::now(),
            }
        }
    }

    /// One admitted call's standard parts, in the order `#[resilient]` makes them: the
    /// operation's numbers, one clock read and the call's deadline (`checked_add`), the
    /// retry's numbers and the first attempt's deadline (`checked_sub`), the allowance's
    /// instant as nanoseconds since its base (`saturating_duration_since`), a slot taken with
    /// `try_acquire` and given back by the permit's drop (`add_permits`).
    pub(crate) async fn standard_parts(parts: &Parts, op: Op, x: u64) -> u64 {
        let [max, _min_budget] = parts.operation.load();
        let now = Instant::now();
        let at = now.checked_add(Duration::from_nanos(max)).unwrap_or(now);
        let [_attempts, _base, _cap, timeout] = parts.retry.load();
        let first = at
            .checked_sub(Duration::from_nanos(max.saturating_sub(timeout)))
            .unwrap_or(at);
        black_box(at.saturating_duration_since(parts.base).as_nanos());
        let slot = parts.slots.try_acquire().expect("a free slot");
        let value = op.run(x).await.expect("the operation succeeds");
        drop(slot);
        black_box(first);
        value
    }
}

/// A tower retry policy that retries nothing: the admitted path of `Retry`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NeverRetry;

impl<Res, E> tower::retry::Policy<u64, Res, E> for NeverRetry {
    type Future = std::future::Ready<()>;

    fn retry(&mut self, _req: &mut u64, _result: &mut Result<Res, E>) -> Option<Self::Future> {
        None
    }

    fn clone_request(&mut self, req: &u64) -> Option<u64> {
        // What a retrying policy does: keep a copy of the request for a second attempt.
        Some(*req)
    }
}

/// The operation as a tower service.
fn service(op: Op) -> impl Service<u64, Response = u64, Error = BoxError> + Clone + Send {
    tower::service_fn(move |x: u64| async move { op.run(x).await.map_err(BoxError::from) })
}

/// One call through a tower service: wait until it is ready, then call it.
#[inline]
pub(crate) async fn call_tower<S>(svc: &mut S, x: u64) -> Result<u64, BoxError>
where
    S: Service<u64, Response = u64, Error = BoxError>,
{
    svc.ready().await?.call(x).await
}

/// A semaphore permit plus `tokio::time::timeout`.
#[inline]
pub(crate) async fn semaphore_timeout(sem: &Semaphore, op: Op, x: u64) -> Result<u64, BoxError> {
    let _permit = sem.acquire().await?;
    Ok(tokio::time::timeout(ATTEMPT_MAX, op.run(x)).await??)
}

/// `failsafe`'s breaker around a semaphore permit plus `timeout`: the hand-built equivalent of
/// breaker + bulkhead + deadline.
#[inline]
pub(crate) async fn failsafe_semaphore_timeout<B>(
    breaker: &B,
    sem: &Semaphore,
    op: Op,
    x: u64,
) -> Result<u64, BoxError>
where
    B: failsafe::futures::CircuitBreaker,
{
    breaker
        .call(semaphore_timeout(sem, op, x))
        .await
        .map_err(|e| match e {
            failsafe::Error::Inner(e) => e,
            failsafe::Error::Rejected => BoxError::from("rejected"),
        })
}

/// A current-thread runtime with the timer, as each bench thread drives its calls.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("build a current-thread runtime")
}

/// Ignores a value without letting the optimizer drop the work that produced it.
#[inline]
pub(crate) fn sink<T>(value: T) {
    std::hint::black_box(value);
}

/// Drives `$iters` calls of `$call` (an expression that may `.await`, with the call number
/// bound to `$x`) inside one `block_on` and inside the request's deadline scope, and returns
/// the wall time of the loop alone.
macro_rules! timed_loop {
    ($rt:expr, $request:expr, $iters:expr, |$x:ident| $call:expr) => {
        $rt.block_on($request.scope(async {
            let start = ::std::time::Instant::now();
            for $x in 0..$iters {
                $crate::common::sink($call);
            }
            start.elapsed()
        }))
    };
}

/// Every contender, by the name the benches and BENCHMARKS.md use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Contender {
    /// The operation alone: the baseline.
    Bare,
    OursBreaker,
    FailsafeBreaker,
    OursBulkhead,
    Semaphore,
    OursDeadline,
    TokioTimeout,
    OursShedding,
    OursRetry,
    TowerRetry,
    ResilientExpansion,
    CriticalExpansion,
    ResilientByHand,
    CriticalByHand,
    OursBreakerBulkheadDeadline,
    OursBreakerTryBulkheadDeadline,
    TowerClTimeout,
    TowerRetryClTimeout,
    SemaphoreTimeout,
    FailsafeSemaphoreTimeout,
    /// [`floor::standard_parts`]: what `#[resilient]`'s standard parts cost alone.
    StandardPartsFloor,
    /// One of [`what_if::VARIANTS`], by index.
    WhatIf(usize),
}

impl Contender {
    /// Each mechanism alone, next to the alternative users write.
    pub(crate) const MECHANISMS: [Contender; 10] = [
        Contender::Bare,
        Contender::OursBreaker,
        Contender::FailsafeBreaker,
        Contender::OursBulkhead,
        Contender::Semaphore,
        Contender::OursDeadline,
        Contender::TokioTimeout,
        Contender::OursShedding,
        Contender::OursRetry,
        Contender::TowerRetry,
    ];

    /// The full stacks.
    pub(crate) const STACKS: [Contender; 11] = [
        Contender::Bare,
        Contender::ResilientExpansion,
        Contender::CriticalExpansion,
        Contender::ResilientByHand,
        Contender::CriticalByHand,
        Contender::OursBreakerBulkheadDeadline,
        Contender::OursBreakerTryBulkheadDeadline,
        Contender::TowerClTimeout,
        Contender::TowerRetryClTimeout,
        Contender::SemaphoreTimeout,
        Contender::FailsafeSemaphoreTimeout,
    ];

    /// Two threads through one shared instance.
    pub(crate) const CONTENTION: [Contender; 14] = [
        Contender::Bare,
        Contender::OursBreaker,
        Contender::FailsafeBreaker,
        Contender::OursBulkhead,
        Contender::Semaphore,
        Contender::OursDeadline,
        Contender::TokioTimeout,
        Contender::OursBreakerBulkheadDeadline,
        Contender::OursBreakerTryBulkheadDeadline,
        Contender::ResilientExpansion,
        Contender::TowerClTimeout,
        Contender::TowerRetryClTimeout,
        Contender::SemaphoreTimeout,
        Contender::FailsafeSemaphoreTimeout,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Contender::Bare => "bare",
            Contender::OursBreaker => "ours_breaker",
            Contender::FailsafeBreaker => "failsafe_breaker",
            Contender::OursBulkhead => "ours_bulkhead",
            Contender::Semaphore => "semaphore",
            Contender::OursDeadline => "ours_deadline",
            Contender::TokioTimeout => "tokio_timeout",
            Contender::OursShedding => "ours_shedding",
            Contender::OursRetry => "ours_retry",
            Contender::TowerRetry => "tower_retry",
            Contender::ResilientExpansion => "resilient_expansion",
            Contender::CriticalExpansion => "critical_expansion",
            Contender::ResilientByHand => "resilient_by_hand",
            Contender::CriticalByHand => "critical_by_hand",
            Contender::OursBreakerBulkheadDeadline => "ours_breaker_bulkhead_deadline",
            Contender::OursBreakerTryBulkheadDeadline => "ours_breaker_try_bulkhead_deadline",
            Contender::TowerClTimeout => "tower_cl_timeout",
            Contender::TowerRetryClTimeout => "tower_retry_cl_timeout",
            Contender::SemaphoreTimeout => "semaphore_timeout",
            Contender::FailsafeSemaphoreTimeout => "failsafe_semaphore_timeout",
            Contender::StandardPartsFloor => "standard_parts_floor",
            Contender::WhatIf(i) => what_if::VARIANTS[i].0,
        }
    }

    pub(crate) fn by_name(name: &str) -> Option<Self> {
        Self::MECHANISMS
            .into_iter()
            .chain(Self::STACKS)
            .chain([Contender::StandardPartsFloor])
            .chain((0..what_if::VARIANTS.len()).map(Contender::WhatIf))
            .find(|c| c.name() == name)
    }
}

/// Everything a thread calls through, built once. Clones share the mechanisms' state: the
/// breakers, the bulkhead, the semaphore and tower's concurrency limit.
#[derive(Clone)]
pub(crate) struct Contenders<F, A, B, C> {
    pub(crate) op: Op,
    pub(crate) ours: Arc<Ours>,
    pub(crate) failsafe: F,
    pub(crate) sem: Arc<Semaphore>,
    /// `ServiceBuilder::new().concurrency_limit(..).timeout(..)`.
    pub(crate) tower_cl_timeout: A,
    /// `ServiceBuilder::new().retry(NeverRetry).concurrency_limit(..).timeout(..)`.
    pub(crate) tower_retry_cl_timeout: B,
    /// `ServiceBuilder::new().retry(NeverRetry)` alone.
    pub(crate) tower_retry: C,
    /// The standard parts under `#[resilient]`, alone ([`floor::standard_parts`]).
    pub(crate) floor: Arc<floor::Parts>,
}

/// The contenders around `op`.
pub(crate) fn contenders(
    op: Op,
) -> Contenders<
    impl failsafe::futures::CircuitBreaker + Clone + Send + Sync,
    impl Service<u64, Response = u64, Error = BoxError> + Clone + Send,
    impl Service<u64, Response = u64, Error = BoxError> + Clone + Send,
    impl Service<u64, Response = u64, Error = BoxError> + Clone + Send,
> {
    Contenders {
        op,
        ours: Arc::new(Ours::new()),
        // `failsafe`'s default configuration: what a user gets from `Config::new().build()`.
        failsafe: failsafe::Config::new().build(),
        sem: Arc::new(Semaphore::new(SLOTS as usize)),
        tower_cl_timeout: ServiceBuilder::new()
            .concurrency_limit(SLOTS as usize)
            .timeout(ATTEMPT_MAX)
            .service(service(op)),
        tower_retry_cl_timeout: ServiceBuilder::new()
            .retry(NeverRetry)
            .concurrency_limit(SLOTS as usize)
            .timeout(ATTEMPT_MAX)
            .service(service(op)),
        tower_retry: ServiceBuilder::new().retry(NeverRetry).service(service(op)),
        floor: Arc::new(floor::Parts::new()),
    }
}

impl<F, A, B, C> Contenders<F, A, B, C>
where
    F: failsafe::futures::CircuitBreaker,
    A: Service<u64, Response = u64, Error = BoxError>,
    B: Service<u64, Response = u64, Error = BoxError>,
    C: Service<u64, Response = u64, Error = BoxError>,
{
    /// Drives `n` calls through `who` in one loop on `rt`, inside `request`'s scope; returns
    /// the loop's wall time. Panics if a call fails: every call here must be admitted.
    pub(crate) fn drive(
        &mut self,
        rt: &tokio::runtime::Runtime,
        request: Deadline,
        who: Contender,
        n: u64,
    ) -> std::time::Duration {
        let op = self.op;
        let ours = &*self.ours;
        let request_ref = &request;
        match who {
            Contender::Bare => timed_loop!(rt, request, n, |x| op.run(x).await.unwrap()),
            Contender::OursBreaker => {
                timed_loop!(rt, request, n, |x| ours.breaker(op, x).await.unwrap())
            }
            Contender::FailsafeBreaker => {
                let fs = &self.failsafe;
                timed_loop!(rt, request, n, |x| fs.call(op.run(x)).await.unwrap())
            }
            Contender::OursBulkhead => timed_loop!(rt, request, n, |x| ours
                .bulkhead(request_ref, op, x)
                .await
                .unwrap()),
            Contender::Semaphore => {
                let sem = &*self.sem;
                timed_loop!(rt, request, n, |x| {
                    let _permit = sem.acquire().await.unwrap();
                    op.run(x).await.unwrap()
                })
            }
            Contender::OursDeadline => timed_loop!(rt, request, n, |x| ours
                .deadline(request_ref, op, x)
                .await
                .unwrap()),
            Contender::TokioTimeout => timed_loop!(rt, request, n, |x| tokio::time::timeout(
                ATTEMPT_MAX,
                op.run(x)
            )
            .await
            .unwrap()
            .unwrap()),
            Contender::OursShedding => timed_loop!(rt, request, n, |x| ours
                .shedding(request_ref, op, x)
                .await
                .unwrap()),
            Contender::OursRetry => timed_loop!(rt, request, n, |x| ours
                .retry(request_ref, op, x)
                .await
                .unwrap()),
            Contender::TowerRetry => {
                let svc = &mut self.tower_retry;
                timed_loop!(rt, request, n, |x| call_tower(svc, x).await.unwrap())
            }
            Contender::ResilientExpansion => timed_loop!(rt, request, n, |x| {
                expansion::resilient_macro(op, x).await.unwrap()
            }),
            Contender::CriticalExpansion => {
                timed_loop!(rt, request, n, |x| expansion::critical_macro(op, x)
                    .await
                    .unwrap())
            }
            Contender::ResilientByHand => timed_loop!(rt, request, n, |x| {
                expansion::resilient(ours, op, x).await.unwrap()
            }),
            Contender::CriticalByHand => {
                timed_loop!(rt, request, n, |x| expansion::critical(op, x)
                    .await
                    .unwrap())
            }
            Contender::OursBreakerBulkheadDeadline => timed_loop!(rt, request, n, |x| ours
                .breaker_bulkhead_deadline(request_ref, op, x)
                .await
                .unwrap()),
            Contender::OursBreakerTryBulkheadDeadline => timed_loop!(rt, request, n, |x| ours
                .breaker_try_bulkhead_deadline(request_ref, op, x)
                .await
                .unwrap()),
            Contender::TowerClTimeout => {
                let svc = &mut self.tower_cl_timeout;
                timed_loop!(rt, request, n, |x| call_tower(svc, x).await.unwrap())
            }
            Contender::TowerRetryClTimeout => {
                let svc = &mut self.tower_retry_cl_timeout;
                timed_loop!(rt, request, n, |x| call_tower(svc, x).await.unwrap())
            }
            Contender::SemaphoreTimeout => {
                let sem = &*self.sem;
                timed_loop!(rt, request, n, |x| semaphore_timeout(sem, op, x)
                    .await
                    .unwrap())
            }
            Contender::StandardPartsFloor => {
                let parts = &self.floor;
                timed_loop!(rt, request, n, |x| floor::standard_parts(parts, op, x)
                    .await)
            }
            Contender::WhatIf(i) => {
                let knobs = what_if::VARIANTS[i].1;
                timed_loop!(rt, request, n, |x| what_if::resilient(ours, knobs, op, x)
                    .await
                    .unwrap())
            }
            Contender::FailsafeSemaphoreTimeout => {
                let (fs, sem) = (&self.failsafe, &*self.sem);
                timed_loop!(rt, request, n, |x| failsafe_semaphore_timeout(
                    fs, sem, op, x
                )
                .await
                .unwrap())
            }
        }
    }
}
