//! How long may this take? A deadline is a point in time with the budget it was granted.
//!
//! The clamp is the whole pattern: [`Deadline::child`] grants the *smaller* of what was asked
//! and what the parent has left, so a child never outlives its parent, whatever it requests.
//! That is also what makes retry and timeout compose instead of multiply: every attempt of
//! [`retry_within`](crate::retry::retry_within) draws from one deadline.
//!
//! A deadline bounds the **wait**, not the work. [`Deadline::run`] stops waiting when the
//! deadline passes and drops the future it was polling; dropping is Rust's cooperative
//! cancellation, so work that reached another thread or another process (a query the database
//! already accepted, a task handed to a pool) runs on behind the `DeadlineExceeded`.
//!
//! The current deadline travels with the task: [`Deadline::scope`] puts one in scope for a
//! future, [`Deadline::current`] reads it, so nested code takes children without passing
//! deadlines by hand.
//!
//! ```
//! use std::time::Duration;
//! use policy_runtime::Deadline;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let request = Deadline::after(Duration::from_secs(2));
//! // A child asking for 10 s gets what the request has left.
//! let lookup = request.child(Duration::from_secs(10));
//! assert!(lookup.remaining() <= Duration::from_secs(2));
//!
//! // Keep 200 ms back for writing the response after the lookup.
//! let lookup = request.child_reserving(Duration::from_secs(10), Duration::from_millis(200));
//! assert!(lookup.remaining() <= Duration::from_millis(1800));
//!
//! let answer = lookup.run(async { 42 }).await;
//! assert_eq!(answer, Ok(42));
//!
//! let too_slow = lookup.run(tokio::time::sleep(Duration::from_secs(5))).await;
//! assert!(too_slow.is_err());
//! # }
//! ```

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use std::cell::Cell;

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};

use crate::error::{DeadlineExceeded, RefusalReason, ResilienceError};

thread_local! {
    /// The deadline in scope while a [`Scope`] future is being polled on this thread, or
    /// [`NO_SCOPE`] outside every scope. A `Cell` of a `Copy` value: entering and leaving a
    /// scope is two plain thread-local writes of two words each (an `Option<Deadline>` has no
    /// niche and would be three).
    static CURRENT: Cell<Deadline> = const { Cell::new(NO_SCOPE) };
}

/// What [`CURRENT`] holds outside every scope. No deadline is made at `i64::MIN`: the process
/// clock saturates at `-i64::MAX` (`process_clock::nanos_of`), and a deadline's expiry is a
/// clock read plus a budget of at least zero.
const NO_SCOPE: Deadline = Deadline {
    at: i64::MIN,
    budget: 0,
    callers: false,
};

impl Deadline {
    /// This deadline, or `None` for [`NO_SCOPE`].
    #[inline(always)]
    fn in_scope(self) -> Option<Self> {
        (self.at != NO_SCOPE.at).then_some(self)
    }
}

/// The process clock every deadline is held on: signed nanoseconds since one instant of
/// tokio's clock (paused in tests), taken the first time a deadline is made. Comparing,
/// clamping and shortening deadlines is then integer arithmetic; only reading the clock and
/// arming a timer convert between instants and nanoseconds. Reading the clock subtracts two
/// whole-nanosecond readings (`raw` below) where the platform's instants can be read so, and
/// takes `std`'s `Instant` arithmetic elsewhere.
pub(crate) mod process_clock {
    use std::hash::{Hash, Hasher};
    use std::sync::OnceLock;
    use std::time::Duration;

    use tokio::time::Instant;

    const NANOS_PER_SEC: i64 = 1_000_000_000;

    /// The process clock's base: an instant of tokio's clock and, when instants can be read
    /// as whole nanoseconds ([`raw`]), its reading.
    struct Base {
        instant: Instant,
        raw: Option<i64>,
    }

    static BASE: OnceLock<Base> = OnceLock::new();

    #[inline]
    fn base() -> &'static Base {
        BASE.get_or_init(|| {
            let instant = Instant::now();
            Base {
                instant,
                raw: raw_checked(instant),
            }
        })
    }

    #[inline]
    fn base_instant() -> Instant {
        base().instant
    }

    /// Collects what an instant's `Hash` writes: on the platforms whose `std` holds an
    /// instant as seconds and nanoseconds (every Unix), one `i64` and one `u32`, in that order.
    /// Anything else is a shape this reading does not know, and leaves it unread.
    #[derive(Default)]
    struct Fields {
        secs: i64,
        nanos: u32,
        /// 0: nothing written, 1: the seconds, 2: both; `u8::MAX`: another shape.
        step: u8,
    }

    impl Hasher for Fields {
        fn finish(&self) -> u64 {
            0
        }

        fn write(&mut self, _: &[u8]) {
            self.step = u8::MAX;
        }

        #[inline(always)]
        fn write_i64(&mut self, secs: i64) {
            self.step = if self.step == 0 { 1 } else { u8::MAX };
            self.secs = secs;
        }

        #[inline(always)]
        fn write_u32(&mut self, nanos: u32) {
            self.step = if self.step == 1 { 2 } else { u8::MAX };
            self.nanos = nanos;
        }
    }

    /// `at` as whole nanoseconds of the clock it was read from, read off the seconds and
    /// nanoseconds it holds (through its `Hash`: `std` has no other safe way to them), or
    /// `None` when its shape is another. Subtracting two readings is then one integer
    /// subtraction, where `Instant::checked_duration_since` is about 50 instructions of
    /// `Timespec` arithmetic and normalisation. Used only once [`raw_checked`] has shown that
    /// readings differ by exactly the durations between their instants.
    #[inline(always)]
    fn raw(at: Instant) -> Option<i64> {
        let mut fields = Fields::default();
        at.hash(&mut fields);
        if fields.step != 2 || i64::from(fields.nanos) >= NANOS_PER_SEC {
            return None;
        }
        fields
            .secs
            .checked_mul(NANOS_PER_SEC)?
            .checked_add(i64::from(fields.nanos))
    }

    /// [`raw`], for the base, once its readings have been checked against `Duration`
    /// arithmetic: two later instants, one a nanosecond on and one a second and 999,999,999
    /// nanoseconds on (so both with and without a carry into the seconds), must read exactly
    /// that much more. Otherwise every conversion takes `std`'s arithmetic.
    fn raw_checked(base: Instant) -> Option<i64> {
        let at = raw(base)?;
        for step in [Duration::from_nanos(1), Duration::new(1, 999_999_999)] {
            let later = raw(base.checked_add(step)?)?;
            if later.checked_sub(at)? != signed(step) {
                return None;
            }
        }
        Some(at)
    }

    /// `d` in nanoseconds, saturating.
    #[inline]
    pub(crate) fn nanos(d: Duration) -> u64 {
        u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
    }

    /// `d` in nanoseconds, saturating: whole seconds and the rest in 64-bit arithmetic (no
    /// 128-bit product, as `Duration::as_nanos` takes).
    #[inline]
    fn signed(d: Duration) -> i64 {
        match i64::try_from(d.as_secs()) {
            Ok(secs) if secs < i64::MAX / NANOS_PER_SEC => {
                secs * NANOS_PER_SEC + i64::from(d.subsec_nanos())
            }
            _ => i64::MAX,
        }
    }

    /// `at` on the process clock (negative before its base: another runtime's paused clock
    /// may run behind the one that took it).
    #[inline]
    pub(crate) fn nanos_of(at: Instant) -> i64 {
        let base = base();
        if let (Some(base_raw), Some(at_raw)) = (base.raw, raw(at)) {
            // Saturating as `std`'s arithmetic below does, and never at `i64::MIN`, which
            // stands for no deadline in scope (`NO_SCOPE`).
            return at_raw.saturating_sub(base_raw).max(-i64::MAX);
        }
        nanos_between(base.instant, at)
    }

    /// [`nanos_of`] by `std`'s arithmetic.
    #[cold]
    #[inline(never)]
    fn nanos_between(base: Instant, at: Instant) -> i64 {
        match at.checked_duration_since(base) {
            Some(after) => signed(after),
            None => -signed(base.duration_since(at)),
        }
    }

    /// Now, on the process clock: one clock read.
    #[inline]
    pub(crate) fn now() -> i64 {
        nanos_of(Instant::now())
    }

    /// The instant `nanos` stands for.
    pub(crate) fn instant_of(nanos: i64) -> Instant {
        let base = base_instant();
        let offset = Duration::from_nanos(nanos.unsigned_abs());
        if nanos >= 0 {
            base.checked_add(offset).unwrap_or(base)
        } else {
            base.checked_sub(offset).unwrap_or(base)
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_duration_becomes_signed_nanoseconds_saturating() {
            assert_eq!(signed(Duration::new(1, 500_000_000)), 1_500_000_000);
            assert_eq!(signed(Duration::from_nanos(7)), 7);
            assert_eq!(
                signed(Duration::from_secs(9_223_372_035)),
                9_223_372_035_000_000_000
            );
            assert_eq!(signed(Duration::from_secs(9_223_372_037)), i64::MAX);
            assert_eq!(signed(Duration::MAX), i64::MAX);
        }

        #[tokio::test(start_paused = true)]
        async fn instants_round_trip_through_the_process_clock_on_a_paused_clock() {
            let start = now();
            tokio::time::advance(Duration::from_millis(1_250)).await;
            let later = now();
            assert_eq!(later - start, 1_250_000_000);
            assert_eq!(nanos_of(instant_of(later)), later);
        }

        /// On Unix `std` holds an instant as seconds and nanoseconds, so the fast reading is
        /// the one every deadline takes here: if a new `std` changed that, this fails rather
        /// than every conversion quietly falling back to `std`'s arithmetic.
        #[cfg(unix)]
        #[test]
        fn instants_are_read_as_whole_nanoseconds_on_unix() {
            // `raw` reads only an instant whose `Hash` writes one `i64` and then one `u32`.
            assert!(raw(Instant::now()).is_some());
            assert!(raw_checked(Instant::now()).is_some());
            assert!(base().raw.is_some());
        }

        /// The fast reading and `std`'s arithmetic agree to the nanosecond, before and after
        /// the base, with and without a carry into the seconds, and at the edges of the range
        /// where the reading gives up (then `std`'s arithmetic answers).
        #[test]
        fn the_fast_reading_agrees_with_std_arithmetic() {
            let base = base_instant();
            let steps = [
                Duration::ZERO,
                Duration::from_nanos(1),
                Duration::from_nanos(999_999_999),
                Duration::new(1, 1),
                Duration::from_millis(1_250),
                Duration::new(86_399, 999_999_999),
                Duration::from_secs(400 * 365 * 86_400),
            ];
            for step in steps {
                if let Some(later) = base.checked_add(step) {
                    assert_eq!(nanos_of(later), nanos_between(base, later), "{step:?} on");
                    assert_eq!(nanos_of(later), signed(step), "{step:?} on");
                }
                if let Some(earlier) = base.checked_sub(step) {
                    assert_eq!(
                        nanos_of(earlier),
                        nanos_between(base, earlier),
                        "{step:?} back"
                    );
                    assert_eq!(nanos_of(earlier), -signed(step), "{step:?} back");
                }
            }
            // Two readings differ by the duration between their instants.
            let a = Instant::now();
            let b = a + Duration::new(3, 700_000_001);
            assert_eq!(raw(b).zip(raw(a)).map(|(b, a)| b - a), Some(3_700_000_001));
        }

        #[tokio::test(start_paused = true)]
        async fn the_fast_reading_follows_a_paused_clock() {
            let start = Instant::now();
            tokio::time::advance(Duration::new(2, 999_999_999)).await;
            let later = Instant::now();
            assert_eq!(nanos_of(later) - nanos_of(start), 2_999_999_999);
            assert_eq!(nanos_of(later), nanos_between(base_instant(), later));
        }
    }
}

use process_clock::nanos;

/// A point in time, with the budget it was granted, and whose budget bounded it. Cheap to copy.
///
/// # Whose budget it is
///
/// A deadline knows whether the time it grants was decided by the **caller** (a budget that
/// arrived from outside the service: a `grpc-timeout` or millisecond header, read by
/// [`DeadlineLayer`](crate::layer::DeadlineLayer) or [`Deadline::from_caller`]) rather than by the
/// service's own configuration ([`Deadline::is_callers`]). A child is the caller's when its
/// parent is and the parent's remaining time, not the child's own maximum, decided what it was
/// granted. An expiry under the caller's budget is the caller's
/// ([`DeadlineExceeded::is_callers`]): the breaker does not count it against the dependency, a
/// retry does not repeat it, a shared store never hears of it. Otherwise any client could open
/// a breaker for every user by sending a short deadline.
///
/// ```
/// use std::time::Duration;
/// use policy_runtime::Deadline;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// // The caller sent 110 ms; the lookup's own configuration gives it 150 ms.
/// let request = Deadline::from_caller(Duration::from_millis(110));
/// assert!(request.child(Duration::from_millis(150)).is_callers());
/// // A lookup of its own 50 ms had all the time its configuration gives it.
/// assert!(!request.child(Duration::from_millis(50)).is_callers());
/// // The service's own budget is never the caller's.
/// assert!(!Deadline::after(Duration::from_millis(110)).child(Duration::from_millis(150)).is_callers());
/// # }
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Deadline {
    /// When it expires, on the [process clock](process_clock).
    at: i64,
    /// The budget it was granted, in nanoseconds (at most [`Deadline::MAX_BUDGET`]).
    budget: u64,
    /// Whether the caller's budget, not this service's configuration, decided `budget`.
    callers: bool,
}

impl fmt::Debug for Deadline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut f = f.debug_struct("Deadline");
        f.field("budget", &self.budget())
            .field("remaining", &self.remaining());
        if self.callers {
            f.field("callers", &true);
        }
        f.finish()
    }
}

impl Deadline {
    /// The longest budget a deadline can hold. Every timeout is bounded: there is no infinite
    /// deadline, and [`Deadline::after`] clamps anything longer to this (24 hours).
    pub const MAX_BUDGET: Duration = Duration::from_secs(24 * 60 * 60);

    /// A deadline `budget` from now (at most [`Deadline::MAX_BUDGET`]).
    #[inline]
    pub fn after(budget: Duration) -> Self {
        Self::after_from(process_clock::now(), nanos(budget))
    }

    /// A deadline `budget` nanoseconds after `now` (a read of tokio's clock): for the request
    /// layer, which converts its configured budget once rather than on every request, and
    /// keeps `now` to arm its timer without converting the deadline back to an instant.
    /// `callers` says whether the budget is the one the caller sent.
    #[cfg(feature = "http")]
    #[inline]
    pub(crate) fn after_nanos_from(now: Instant, budget: u64, callers: bool) -> Self {
        Self {
            callers,
            ..Self::after_from(process_clock::nanos_of(now), budget)
        }
    }

    /// A deadline of a budget the **caller** sent (a `grpc-timeout` or millisecond header read
    /// by hand): an expiry under it is the caller's, never counted against a dependency
    /// ([`Deadline::is_callers`]). [`DeadlineLayer`](crate::layer::DeadlineLayer) makes these
    /// itself when a request's header is what bounds it.
    pub fn from_caller(budget: Duration) -> Self {
        Self {
            callers: true,
            ..Self::after(budget)
        }
    }

    /// Whether the caller's budget, rather than this service's own configuration, decided what
    /// this deadline grants: see [whose budget it is](Deadline#whose-budget-it-is).
    #[inline]
    pub fn is_callers(&self) -> bool {
        self.callers
    }

    /// The expiry of this deadline: what [`Deadline::run`] returns when it passes.
    #[inline]
    pub fn exceeded(&self) -> DeadlineExceeded {
        DeadlineExceeded::new(self.budget()).with_callers(self.callers)
    }

    #[inline]
    fn after_from(now: i64, budget: u64) -> Self {
        let budget = budget.min(nanos(Self::MAX_BUDGET));
        Self {
            // The budget is at most a day: it fits an i64.
            at: now.saturating_add(budget as i64),
            budget,
            callers: false,
        }
    }

    /// A deadline at `at`; its budget is what is left from now (at most
    /// [`Deadline::MAX_BUDGET`]).
    pub fn at(at: Instant) -> Self {
        let now = process_clock::now();
        let left = process_clock::nanos_of(at).saturating_sub(now).max(0);
        Self::after_from(now, left.unsigned_abs())
    }

    /// The instant it expires.
    pub fn instant(&self) -> Instant {
        process_clock::instant_of(self.at)
    }

    /// The budget it was granted when created.
    #[inline]
    pub fn budget(&self) -> Duration {
        Duration::from_nanos(self.budget)
    }

    /// The budget in nanoseconds, as held.
    #[inline]
    pub(crate) fn budget_nanos(&self) -> u64 {
        self.budget
    }

    /// What is left; zero once expired.
    pub fn remaining(&self) -> Duration {
        Duration::from_nanos(self.left_at(process_clock::now()))
    }

    /// Nanoseconds left at `now`; zero once expired.
    #[inline]
    fn left_at(&self, now: i64) -> u64 {
        self.at.saturating_sub(now).max(0).unsigned_abs()
    }

    /// True once the deadline has passed.
    pub fn is_expired(&self) -> bool {
        process_clock::now() >= self.at
    }

    /// A child deadline: the smaller of `max` and what this deadline has left. A child can
    /// never outlive its parent, whatever it asks for.
    #[inline]
    pub fn child(&self, max: Duration) -> Self {
        self.child_reserving(max, Duration::ZERO)
    }

    /// A child deadline that also holds `reserve` back for work after the child (writing the
    /// response, a compensating delete): the smaller of `max` and what is left minus `reserve`.
    /// When the reserve is larger than what is left, the child is already expired.
    #[inline]
    pub fn child_reserving(&self, max: Duration, reserve: Duration) -> Self {
        let now = process_clock::now();
        let left = self.left_at(now).saturating_sub(nanos(reserve));
        self.granting(now, nanos(max), left)
    }

    /// The child asking for `max` nanoseconds from `now`, of a parent with `left` to give: it
    /// is granted the smaller, and is the caller's when the parent is and the parent's `left`
    /// decided it.
    #[inline]
    fn granting(&self, now: i64, max: u64, left: u64) -> Self {
        let granted = max.min(left);
        Self {
            // An expired parent's child expires with it, not now.
            at: now
                .saturating_add(i64::try_from(granted).unwrap_or(i64::MAX))
                .min(self.at),
            budget: granted,
            callers: self.callers && left < max,
        }
    }

    /// The moment the deadline was created (its expiry minus its budget), on the process
    /// clock: a time the caller already read, for code that must not read the clock again
    /// right after creating it.
    #[inline]
    pub(crate) fn created_nanos(&self) -> i64 {
        // The budget is at most a day: it fits an i64.
        self.at.saturating_sub(self.budget as i64)
    }

    /// [`Deadline::child`] of at most `max` nanoseconds, as of `now` (on the process clock), a
    /// moment the caller read: no clock read here. With a `now` in the past, the child is
    /// granted less, never more: it still never outlives its parent.
    #[inline]
    pub(crate) fn child_as_of_nanos(&self, now: i64, max: u64) -> Self {
        self.granting(now, max, self.left_at(now))
    }

    /// [`Deadline::child_as_of_nanos`] as of the moment this deadline was made
    /// ([`Deadline::created_nanos`]), for a `max` below its budget: the child expires `max`
    /// after that moment. Integer arithmetic only: what a retry's first attempt takes when
    /// the call's deadline was made just before it.
    #[inline]
    pub(crate) fn child_at_creation(&self, max: u64) -> Self {
        debug_assert!(max < self.budget, "a child below the budget");
        Self {
            // `budget - max` is positive and at most a day: it fits an i64, and the child's
            // expiry is before the parent's.
            at: self.at.saturating_sub((self.budget - max) as i64),
            budget: max,
            // Granted all it asked for: its own configuration bounded it.
            callers: false,
        }
    }

    /// Refuses to start an operation with less than its minimum useful budget left.
    ///
    /// Without a minimum, "the budget ran out" is a boundary condition rather than a decision:
    /// the last call starts with a fraction of a millisecond and is abandoned before it can
    /// return. The refusal is decided before any work starts, so it is a
    /// [`ResilienceError`] of kind [`InsufficientBudget`](crate::RefusalKind::InsufficientBudget).
    ///
    /// ```
    /// use std::time::Duration;
    /// use policy_runtime::{Deadline, RefusalKind};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let d = Deadline::after(Duration::from_millis(150));
    /// let refusal = d.require(Duration::from_millis(200), "charge_card").unwrap_err();
    /// assert_eq!(refusal.kind(), RefusalKind::InsufficientBudget);
    /// assert!(d.require(Duration::from_millis(100), "charge_card").is_ok());
    /// # }
    /// ```
    pub fn require(&self, min_budget: Duration, operation: &str) -> Result<(), ResilienceError> {
        let remaining = self.remaining();
        // An expired deadline starts nothing, even for an operation that states no minimum.
        if remaining >= min_budget && !remaining.is_zero() {
            return Ok(());
        }
        let refusal = ResilienceError::new(
            operation,
            RefusalReason::InsufficientBudget {
                remaining,
                min_budget,
            },
        );
        crate::observe::refused(&refusal);
        Err(refusal)
    }

    /// The deadline of the operation named `operation`: a child of the current deadline (or a fresh one of
    /// `max` outside any scope), refused with [`InsufficientBudget`](crate::RefusalKind::InsufficientBudget)
    /// when it grants less than `min_budget` (or nothing at all). One clock read; this is how
    /// the attribute macros start every annotated function.
    ///
    /// ```
    /// use std::time::Duration;
    /// use policy_runtime::{Deadline, RefusalKind};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let lookup = Deadline::for_operation("lookup", Duration::from_secs(2), Duration::from_millis(50)).unwrap();
    /// assert_eq!(lookup.budget(), Duration::from_secs(2));
    ///
    /// let request = Deadline::after(Duration::from_millis(30));
    /// let refused = request
    ///     .scope(async { Deadline::for_operation("lookup", Duration::from_secs(2), Duration::from_millis(50)) })
    ///     .await;
    /// assert_eq!(refused.unwrap_err().kind(), RefusalKind::InsufficientBudget);
    /// # }
    /// ```
    #[inline]
    pub fn for_operation(
        operation: &str,
        max: Duration,
        min_budget: Duration,
    ) -> Result<Self, ResilienceError> {
        let deadline = Self::child_of_current(max);
        if deadline.budget >= nanos(min_budget) && deadline.budget != 0 {
            return Ok(deadline);
        }
        Err(Self::too_little(operation, deadline.budget(), min_budget))
    }

    /// [`Deadline::for_operation`] with the operation's current numbers: its deadline and
    /// minimum budget read once, together, from `operation` (which a reload may change).
    // Always inlined: with `#[inline]` it stayed a call of its own in the expansion, 79
    // instructions of frame (its saved registers, its `Result` moved through memory).
    #[inline(always)]
    pub fn for_named(operation: &OperationDeadline) -> Result<Self, ResilienceError> {
        // Read as words (nanoseconds), never converted to a `Duration` and back on the way.
        let [max, min_budget] = operation.numbers.read();
        let deadline = Self::child_of_current_nanos(max);
        if deadline.budget >= min_budget && deadline.budget != 0 {
            return Ok(deadline);
        }
        Err(Self::too_little_named(
            operation,
            deadline.budget,
            min_budget,
        ))
    }

    /// [`Deadline::too_little`] for the operation `operation`: its own name is found only
    /// here, for a refusal (a string search per call otherwise, about 450 instructions, more
    /// than the rest of a `#[critical]` call), and the numbers become durations here too, out
    /// of the admitted path.
    #[cold]
    #[inline(never)]
    fn too_little_named(
        operation: &OperationDeadline,
        remaining: u64,
        min_budget: u64,
    ) -> ResilienceError {
        Self::too_little(
            operation.display_name(),
            Duration::from_nanos(remaining),
            Duration::from_nanos(min_budget),
        )
    }

    /// The refusal of an operation granted less than its minimum, counted and logged.
    #[cold]
    #[inline(never)]
    fn too_little(operation: &str, remaining: Duration, min_budget: Duration) -> ResilienceError {
        let refusal = ResilienceError::new(
            operation,
            RefusalReason::InsufficientBudget {
                remaining,
                min_budget,
            },
        );
        crate::observe::refused(&refusal);
        refusal
    }

    /// Polls `fut` until it completes or the deadline passes, whichever comes first.
    ///
    /// A future that is ready on its first poll costs no timer: the timer is armed only when
    /// the future first returns `Pending`. At the deadline the future is dropped (Rust's
    /// cooperative cancellation) and `DeadlineExceeded` returned; work it had handed to another
    /// thread runs on.
    // By value (a deadline is two words): a `&self` here would borrow the caller's local, and
    // an `async` block keeps a borrowed local across every later `.await`, 16 bytes more in
    // its future for nothing.
    pub fn run<F: Future>(self, fut: F) -> Run<F> {
        Run {
            fut,
            sleep: None,
            deadline: self,
        }
    }

    /// [`Deadline::run`] with the deadline in [scope](Deadline::scope) while `fut` is polled:
    /// `fut` is bounded by this deadline, and code inside it takes children of it. This is how
    /// the attribute macros run a function's body.
    ///
    /// ```
    /// use std::time::Duration;
    /// use policy_runtime::Deadline;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let deadline = Deadline::after(Duration::from_secs(2));
    /// let inner = deadline
    ///     .run_in_scope(async { Deadline::child_of_current(Duration::from_secs(10)).budget() })
    ///     .await;
    /// assert_eq!(inner, Ok(Duration::from_secs(2)));
    /// # }
    /// ```
    #[inline(always)]
    pub fn run_in_scope<F: Future>(self, fut: F) -> Run<Scope<F>> {
        self.run(self.scope(fut))
    }

    /// Runs `fut` with this deadline as the [current](Deadline::current) one, so code inside
    /// takes children of it without having it passed by hand. Like a task-local, the deadline
    /// is in scope only while `fut` is being polled: a task `fut` spawns does not inherit it.
    pub fn scope<F: Future>(self, fut: F) -> Scope<F> {
        Scope {
            fut,
            deadline: self,
        }
    }

    /// Runs `f` with this deadline as the [current](Deadline::current) one: the synchronous
    /// counterpart of [`Deadline::scope`], for a tower service's `call` (which may start work
    /// before its future is first polled).
    #[inline]
    pub fn sync_scope<R>(self, f: impl FnOnce() -> R) -> R {
        let previous = CURRENT
            .try_with(|current| current.replace(self))
            .unwrap_or(NO_SCOPE);
        let _restore = Restore(previous);
        f()
    }

    /// The deadline in scope for the current task, if any.
    #[inline]
    pub fn current() -> Option<Self> {
        CURRENT.try_with(Cell::get).ok().and_then(Self::in_scope)
    }

    /// A child of the current deadline, or, outside any scope, a fresh deadline of `max`.
    #[inline]
    pub fn child_of_current(max: Duration) -> Self {
        Self::child_of_current_nanos(nanos(max))
    }

    /// [`Deadline::child_of_current`] of at most `max` nanoseconds: one clock read, whichever
    /// branch.
    #[inline]
    fn child_of_current_nanos(max: u64) -> Self {
        let now = process_clock::now();
        match Self::current() {
            Some(parent) => parent.granting(now, max, parent.left_at(now)),
            None => Self::after_from(now, max),
        }
    }

    /// The remaining budget as a gRPC `grpc-timeout` header value (`"1500m"`), so a deadline
    /// can cross a service boundary. The value is rounded down, so the receiver never waits
    /// longer than we would.
    pub fn to_grpc_timeout(&self) -> String {
        format_grpc_timeout(self.remaining())
    }

    /// A deadline from a gRPC `grpc-timeout` header value, clamped to
    /// [`Deadline::MAX_BUDGET`]: the caller's budget ([`Deadline::from_caller`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use policy_runtime::Deadline;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let d = Deadline::from_grpc_timeout("250m").unwrap();
    /// assert_eq!(d.budget(), Duration::from_millis(250));
    /// assert_eq!(d.to_grpc_timeout(), "250000u");
    /// assert!(d.is_callers());
    /// assert!(Deadline::from_grpc_timeout("1.5S").is_err());
    /// # }
    /// ```
    pub fn from_grpc_timeout(header: &str) -> Result<Self, GrpcTimeoutError> {
        parse_grpc_timeout(header).map(Self::from_caller)
    }
}

/// A `grpc-timeout` header value that is not `1` to `8` ASCII digits followed by one of the
/// units `H`, `M`, `S`, `m`, `u`, `n`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid grpc-timeout header: expected 1 to 8 digits and a unit (H, M, S, m, u or n), as in `250m`"
)]
pub struct GrpcTimeoutError(());

/// Parses a `grpc-timeout` header value into a duration.
pub fn parse_grpc_timeout(header: &str) -> Result<Duration, GrpcTimeoutError> {
    let header = header.trim();
    let Some(unit) = header.chars().last() else {
        return Err(GrpcTimeoutError(()));
    };
    let digits = &header[..header.len() - unit.len_utf8()];
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(GrpcTimeoutError(()));
    }
    let value: u64 = digits.parse().map_err(|_| GrpcTimeoutError(()))?;
    let duration = match unit {
        'H' => Duration::from_secs(value * 3600),
        'M' => Duration::from_secs(value * 60),
        'S' => Duration::from_secs(value),
        'm' => Duration::from_millis(value),
        'u' => Duration::from_micros(value),
        'n' => Duration::from_nanos(value),
        _ => return Err(GrpcTimeoutError(())),
    };
    Ok(duration)
}

/// Formats a duration as a `grpc-timeout` header value: the finest unit whose value fits in
/// eight digits, rounded down.
pub fn format_grpc_timeout(d: Duration) -> String {
    const MAX: u128 = 99_999_999;
    let nanos = d.as_nanos();
    let units: [(u128, char); 6] = [
        (1, 'n'),
        (1_000, 'u'),
        (1_000_000, 'm'),
        (1_000_000_000, 'S'),
        (60_000_000_000, 'M'),
        (3_600_000_000_000, 'H'),
    ];
    for (per, unit) in units {
        let value = nanos / per;
        if value <= MAX {
            return format!("{value}{unit}");
        }
    }
    format!("{MAX}H")
}

pin_project! {
    /// The future returned by [`Deadline::scope`]: `fut`, polled with the deadline in scope.
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct Scope<F> {
        #[pin]
        fut: F,
        deadline: Deadline,
    }
}

/// Puts the previous deadline back when a poll ends, also when it unwinds.
struct Restore(Deadline);

impl Drop for Restore {
    #[inline]
    fn drop(&mut self) {
        let _ = CURRENT.try_with(|current| current.set(self.0));
    }
}

impl<F: Future> Future for Scope<F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let previous = CURRENT
            .try_with(|current| current.replace(*this.deadline))
            .unwrap_or(NO_SCOPE);
        let _restore = Restore(previous);
        this.fut.poll(cx)
    }
}

pin_project! {
    /// The future returned by [`Deadline::run`].
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct Run<F> {
        #[pin]
        fut: F,
        #[pin]
        sleep: Option<Sleep>,
        deadline: Deadline,
    }
}

impl<F: Future> Future for Run<F> {
    type Output = Result<F::Output, DeadlineExceeded>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Poll::Ready(out) = this.fut.poll(cx) {
            return Poll::Ready(Ok(out));
        }
        let expired = || Poll::Ready(Err(this.deadline.exceeded()));
        if this.sleep.is_none() {
            // First Pending: only now is a timer worth arming. A deadline already past fires
            // on the timer's first poll, so no clock read is needed here.
            this.sleep
                .set(Some(tokio::time::sleep_until(this.deadline.instant())));
        }
        match this.sleep.as_pin_mut().map(|s| s.poll(cx)) {
            Some(Poll::Ready(())) => expired(),
            _ => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_round_trips_in_each_unit() {
        let cases = [
            ("1H", Duration::from_secs(3600)),
            ("2M", Duration::from_secs(120)),
            ("3S", Duration::from_secs(3)),
            ("250m", Duration::from_millis(250)),
            ("7u", Duration::from_micros(7)),
            ("99999999n", Duration::from_nanos(99_999_999)),
        ];
        for (text, d) in cases {
            assert_eq!(parse_grpc_timeout(text), Ok(d), "{text}");
            assert_eq!(parse_grpc_timeout(&format_grpc_timeout(d)), Ok(d), "{text}");
        }
    }

    #[test]
    fn grpc_timeout_formats_in_the_finest_unit_that_fits() {
        assert_eq!(format_grpc_timeout(Duration::from_millis(250)), "250000u");
        assert_eq!(format_grpc_timeout(Duration::from_secs(3)), "3000000u");
        assert_eq!(format_grpc_timeout(Duration::from_secs(200)), "200000m");
        assert_eq!(format_grpc_timeout(Duration::ZERO), "0n");
        // Rounded down: never promises the receiver more time than we have.
        assert_eq!(
            format_grpc_timeout(Duration::from_nanos(123_456_789_999)),
            "123456m"
        );
    }

    #[test]
    fn grpc_timeout_rejects_malformed_values() {
        for bad in [
            "",
            "m",
            "123",
            "123456789m",
            "1.5S",
            "-1S",
            "10x",
            "１S",
            "10 S",
        ] {
            assert!(parse_grpc_timeout(bad).is_err(), "{bad:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_child_at_creation_is_the_child_as_of_the_moment_the_deadline_was_made() {
        tokio::time::advance(Duration::from_millis(1_234)).await;
        for budget_ms in [1, 50, 2_000, 86_400_000] {
            let deadline = Deadline::after(Duration::from_millis(budget_ms));
            // Later than its creation: the clock is not what the child is counted from.
            tokio::time::advance(Duration::from_millis(7)).await;
            for max in [0, 1, budget_ms * 1_000_000 / 2, budget_ms * 1_000_000 - 1] {
                let made = deadline.created_nanos();
                assert_eq!(
                    deadline.child_at_creation(max),
                    deadline.child_as_of_nanos(made, max),
                    "budget {budget_ms} ms, max {max} ns"
                );
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn any_deadline_in_scope_is_current_even_the_earliest_and_an_expired_one() {
        assert_eq!(Deadline::current(), None);
        // The earliest deadline the process clock can hold: an instant far behind its base.
        let base = process_clock::instant_of(0);
        let far_back = base
            .checked_sub(Duration::from_secs(400 * 365 * 24 * 3600))
            .unwrap_or(base);
        let earliest = Deadline::after_from(process_clock::nanos_of(far_back), 0);
        // Expired with nothing granted: the same budget as the no-scope marker, not its time.
        let expired = Deadline::after(Duration::ZERO);
        for deadline in [earliest, expired, Deadline::after(Duration::from_secs(3))] {
            assert_ne!(
                deadline.at, NO_SCOPE.at,
                "{deadline:?} is a deadline, not no scope"
            );
            let seen = deadline.scope(async { Deadline::current() }).await;
            assert_eq!(seen, Some(deadline));
            assert_eq!(deadline.sync_scope(Deadline::current), Some(deadline));
            assert_eq!(Deadline::current(), None, "the scope ends with its poll");
        }
    }
}

/// The deadline and minimum budget of one named operation: the registry's entry an annotated
/// function reads on every call ([`Deadline::for_named`]), so an override can change them while
/// the service runs. Both numbers are published together (one cell, read with no lock):
/// a call reads both from before a reload or both from after it.
///
/// ```
/// use std::time::Duration;
/// use policy_runtime::deadline::OperationDeadline;
///
/// let search = OperationDeadline::new("shop::search", Duration::from_secs(2), Duration::ZERO);
/// assert_eq!(search.display_name(), "search");
/// assert_eq!(search.current(), (Duration::from_secs(2), Duration::ZERO));
/// ```
pub struct OperationDeadline {
    name: std::sync::Arc<str>,
    compiled: (Duration, Duration),
    numbers: crate::tuning::Tuned<2>,
}

impl fmt::Debug for OperationDeadline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (deadline, min_budget) = self.current();
        f.debug_struct("OperationDeadline")
            .field("name", &self.name)
            .field("deadline", &deadline)
            .field("min_budget", &min_budget)
            .finish()
    }
}

/// A point-in-time view of an operation's deadline, for dashboards.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct OperationSnapshot {
    /// The entry's name: for an annotated function's, the operation's name made unique by
    /// the module path.
    pub name: std::sync::Arc<str>,
    /// The operation's own name, what a dashboard shows.
    pub display_name: std::sync::Arc<str>,
    /// The deadline in use.
    #[serde(rename = "deadline_ms", serialize_with = "crate::observe::millis")]
    pub deadline: Duration,
    /// The minimum budget in use.
    #[serde(rename = "min_budget_ms", serialize_with = "crate::observe::millis")]
    pub min_budget: Duration,
    /// The deadline compiled in.
    #[serde(
        rename = "compiled_deadline_ms",
        serialize_with = "crate::observe::millis"
    )]
    pub compiled_deadline: Duration,
    /// The minimum budget compiled in.
    #[serde(
        rename = "compiled_min_budget_ms",
        serialize_with = "crate::observe::millis"
    )]
    pub compiled_min_budget: Duration,
}

impl OperationDeadline {
    /// The operation `name` (its last `::` segment is the operation's own name), with the
    /// compiled `deadline` (at most [`Deadline::MAX_BUDGET`]) and `min_budget`.
    pub fn new(
        name: impl Into<std::sync::Arc<str>>,
        deadline: Duration,
        min_budget: Duration,
    ) -> Self {
        use crate::tuning::word;
        Self {
            name: name.into(),
            compiled: (deadline, min_budget),
            numbers: crate::tuning::Tuned::new([word(deadline), word(min_budget)]),
        }
    }

    /// The entry's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The operation's own name: the name without its module path.
    pub fn display_name(&self) -> &str {
        crate::observe::short_name(&self.name)
    }

    /// The deadline and the minimum budget in use now, read together.
    #[inline]
    pub fn current(&self) -> (Duration, Duration) {
        let [deadline, min_budget] = self.numbers.read();
        (
            crate::tuning::duration(deadline),
            crate::tuning::duration(min_budget),
        )
    }

    /// The deadline and the minimum budget compiled in.
    pub fn compiled(&self) -> (Duration, Duration) {
        self.compiled
    }

    /// Uses `deadline` and `min_budget` from the next call on; true when they changed.
    #[cfg(feature = "overrides")]
    pub(crate) fn retune(&self, deadline: Duration, min_budget: Duration) -> bool {
        use crate::tuning::word;
        self.numbers.write([word(deadline), word(min_budget)])
    }

    /// A point-in-time view, for dashboards.
    pub fn snapshot(&self) -> OperationSnapshot {
        let (deadline, min_budget) = self.current();
        OperationSnapshot {
            name: self.name.clone(),
            display_name: self.display_name().into(),
            deadline,
            min_budget,
            compiled_deadline: self.compiled.0,
            compiled_min_budget: self.compiled.1,
        }
    }
}
