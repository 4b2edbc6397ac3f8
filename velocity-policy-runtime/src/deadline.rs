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
//! use velocity_policy_runtime::Deadline;
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

/// An operation's deadline settings: defined once, in `velocity-policy-model`, for the
/// `.policy` language, the attribute macros, this runtime and its overrides.
pub use velocity_policy_model::deadline::DeadlineConfig;

thread_local! {
    /// The deadline in scope while a [`Scope`] future is being polled on this thread: two
    /// thread-local writes to enter and leave a scope.
    static CURRENT: Cell<Option<Deadline>> = const { Cell::new(None) };
}

/// `now + d`, or `now` when that would not fit an instant (a budget is at most a day, which
/// fits any clock tokio runs on; this only keeps arithmetic on instants from panicking).
#[inline]
fn later(now: Instant, d: Duration) -> Instant {
    now.checked_add(d).unwrap_or(now)
}

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
/// use velocity_policy_runtime::Deadline;
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
    /// When it expires, on tokio's clock (paused in tests).
    at: Instant,
    /// The budget it was granted, and whether the caller's budget decided it.
    granted: Granted,
}

/// A deadline's budget in nanoseconds (at most [`Deadline::MAX_BUDGET`], a day: below 2⁴⁷),
/// with whether the caller's budget, not this service's configuration, decided it in the top
/// bit: one word, so a deadline is three (every future that holds one is moved per call).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Granted(u64);

/// [`Deadline::MAX_BUDGET`] in nanoseconds.
const MAX_BUDGET_NANOS: u64 =
    Deadline::MAX_BUDGET.as_secs() * 1_000_000_000 + Deadline::MAX_BUDGET.subsec_nanos() as u64;

impl Granted {
    const CALLERS: u64 = 1 << 63;

    /// `budget`, at most [`Deadline::MAX_BUDGET`].
    #[inline]
    fn new(budget: Duration, callers: bool) -> Self {
        let nanos = crate::window::saturating_nanos(budget.min(Deadline::MAX_BUDGET));
        Self(if callers {
            nanos | Self::CALLERS
        } else {
            nanos
        })
    }

    /// `budget`, already at most [`Deadline::MAX_BUDGET`] (clamped by the caller): `new`
    /// without a second clamp and without the saturation a day's nanoseconds never need.
    #[inline]
    fn within_max(budget: Duration, callers: bool) -> Self {
        debug_assert!(budget <= Deadline::MAX_BUDGET);
        let nanos = budget.as_secs() * 1_000_000_000 + u64::from(budget.subsec_nanos());
        Self(if callers {
            nanos | Self::CALLERS
        } else {
            nanos
        })
    }

    /// A budget of `nanos` nanoseconds, at most [`Deadline::MAX_BUDGET`], not the caller's.
    #[inline]
    fn of_nanos(nanos: u64) -> Self {
        Self(nanos.min(MAX_BUDGET_NANOS))
    }

    #[inline]
    fn nanos(self) -> u64 {
        self.0 & !Self::CALLERS
    }

    #[inline]
    fn budget(self) -> Duration {
        Duration::from_nanos(self.nanos())
    }

    #[inline]
    fn callers(self) -> bool {
        self.0 & Self::CALLERS != 0
    }
}

impl fmt::Debug for Deadline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut f = f.debug_struct("Deadline");
        f.field("budget", &self.budget())
            .field("remaining", &self.remaining());
        if self.is_callers() {
            f.field("callers", &true);
        }
        f.finish()
    }
}

impl Deadline {
    /// The longest budget a deadline can hold. Every timeout is bounded: there is no infinite
    /// deadline, and [`Deadline::after`] clamps anything longer to this (24 hours,
    /// [`DeadlineConfig::MAX_BUDGET`]).
    pub const MAX_BUDGET: Duration = DeadlineConfig::MAX_BUDGET;

    /// A deadline `budget` from now (at most [`Deadline::MAX_BUDGET`]).
    #[inline]
    pub fn after(budget: Duration) -> Self {
        Self::after_from(Instant::now(), budget)
    }

    /// A deadline `budget` after `now` (a read of tokio's clock the caller already made), the
    /// caller's when `callers` says the budget is the one the caller sent.
    #[inline]
    pub(crate) fn after_from_callers(now: Instant, budget: Duration, callers: bool) -> Self {
        // `after_from`'s, with the caller's bit set as the budget is stored: not stored, read
        // back and stored again (a division by a billion and back, per request).
        let budget = budget.min(Self::MAX_BUDGET);
        Self {
            at: later(now, budget),
            granted: Granted::within_max(budget, callers),
        }
    }

    /// A deadline of a budget the **caller** sent (a `grpc-timeout` or millisecond header read
    /// by hand): an expiry under it is the caller's, never counted against a dependency
    /// ([`Deadline::is_callers`]). [`DeadlineLayer`](crate::layer::DeadlineLayer) makes these
    /// itself when a request's header is what bounds it.
    pub fn from_caller(budget: Duration) -> Self {
        Self::after_from_callers(Instant::now(), budget, true)
    }

    /// Whether the caller's budget, rather than this service's own configuration, decided what
    /// this deadline grants: see [whose budget it is](Deadline#whose-budget-it-is).
    #[inline]
    pub fn is_callers(&self) -> bool {
        self.granted.callers()
    }

    /// The expiry of this deadline: what [`Deadline::run`] returns when it passes.
    #[inline]
    pub fn exceeded(&self) -> DeadlineExceeded {
        DeadlineExceeded::new(self.budget()).with_callers(self.is_callers())
    }

    #[inline]
    fn after_from(now: Instant, budget: Duration) -> Self {
        let budget = budget.min(Self::MAX_BUDGET);
        Self {
            at: later(now, budget),
            granted: Granted::new(budget, false),
        }
    }

    /// A deadline at `at`; its budget is what is left from now (at most
    /// [`Deadline::MAX_BUDGET`]).
    pub fn at(at: Instant) -> Self {
        let now = Instant::now();
        Self::after_from(now, at.saturating_duration_since(now))
    }

    /// The instant it expires.
    #[inline]
    pub fn instant(&self) -> Instant {
        self.at
    }

    /// The budget it was granted when created.
    #[inline]
    pub fn budget(&self) -> Duration {
        self.granted.budget()
    }

    /// What is left; zero once expired.
    pub fn remaining(&self) -> Duration {
        self.left_at(Instant::now())
    }

    /// What is left at `now`; zero once expired.
    #[inline]
    fn left_at(&self, now: Instant) -> Duration {
        self.at.saturating_duration_since(now)
    }

    /// True once the deadline has passed.
    pub fn is_expired(&self) -> bool {
        Instant::now() >= self.at
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
        let now = Instant::now();
        let left = self.left_at(now).saturating_sub(reserve);
        self.granting(now, max, left)
    }

    /// [`Deadline::child`] as of `now`, a read of tokio's clock the caller already made. With a
    /// `now` in the past, the child is granted less, never more: it still never outlives its
    /// parent.
    #[inline]
    pub(crate) fn child_as_of(&self, now: Instant, max: Duration) -> Self {
        let max = max.min(Self::MAX_BUDGET);
        let wanted = later(now, max);
        if wanted <= self.at {
            // It has all it asked for: its own configuration bounds it. One instant addition.
            return Self {
                at: wanted,
                granted: Granted::new(max, false),
            };
        }
        self.granting(now, max, self.left_at(now))
    }

    /// [`Deadline::child_as_of`] for a maximum of `max_nanos` nanoseconds, as a tuned cell
    /// holds it: the budget's word is taken as it is, not converted back from a duration.
    #[inline]
    fn child_as_of_nanos(&self, now: Instant, max_nanos: u64) -> Self {
        let granted = Granted::of_nanos(max_nanos);
        let max = granted.budget();
        let wanted = later(now, max);
        if wanted <= self.at {
            // It has all it asked for: its own configuration bounds it.
            return Self {
                at: wanted,
                granted,
            };
        }
        self.granting(now, max, self.left_at(now))
    }

    /// The budget it was granted, in nanoseconds.
    #[inline]
    pub(crate) fn budget_nanos(&self) -> u64 {
        self.granted.nanos()
    }

    /// The child of at most `max_nanos` nanoseconds as of the moment this deadline was made
    /// (its expiry less its budget): for a maximum below its budget it expires that long after
    /// that moment, one comparison of words and one instant subtraction; otherwise it is this
    /// deadline.
    #[inline]
    pub(crate) fn child_at_creation_nanos(&self, max_nanos: u64) -> Self {
        let budget = self.granted.nanos();
        if max_nanos >= budget {
            return *self;
        }
        Self {
            at: self
                .at
                .checked_sub(Duration::from_nanos(budget - max_nanos))
                .unwrap_or(self.at),
            // Granted all it asked for: its own configuration bounded it (below the budget,
            // so below the longest).
            granted: Granted(max_nanos),
        }
    }

    /// The child asking for `max` from `now`, of a parent with `left` to give: it is granted
    /// the smaller, and is the caller's when the parent is and the parent's `left` decided it.
    #[inline]
    fn granting(&self, now: Instant, max: Duration, left: Duration) -> Self {
        let granted = max.min(left);
        Self {
            // An expired parent's child expires with it, not now.
            at: later(now, granted).min(self.at),
            granted: Granted::new(granted, self.is_callers() && left < max),
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
    /// use velocity_policy_runtime::{Deadline, RefusalKind};
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
    /// use velocity_policy_runtime::{Deadline, RefusalKind};
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
        if deadline.budget() >= min_budget && !deadline.budget().is_zero() {
            return Ok(deadline);
        }
        Err(Self::too_little(operation, deadline.budget(), min_budget))
    }

    /// [`Deadline::for_operation`] with the operation's current numbers: its deadline and
    /// minimum budget read once, together, from `operation` (which a reload may change).
    #[inline]
    pub fn for_named(operation: &OperationDeadline) -> Result<Self, ResilienceError> {
        // Both numbers as the cell holds them, nanoseconds: compared as words, and only the
        // deadline's converted (to add it to the clock's reading).
        let [max, min_budget] = operation.words();
        let now = Instant::now();
        let deadline = match Self::current() {
            Some(parent) => parent.child_as_of_nanos(now, max),
            None => Self {
                at: later(now, Granted::of_nanos(max).budget()),
                granted: Granted::of_nanos(max),
            },
        };
        let granted = deadline.granted.nanos();
        if granted >= min_budget && granted != 0 {
            return Ok(deadline);
        }
        Err(Self::too_little_named(
            operation,
            deadline.budget(),
            Duration::from_nanos(min_budget),
        ))
    }

    /// [`Deadline::too_little`] for the operation `operation`: its own name (a search of the
    /// registered name) is found only for a refusal, never on the admitted path.
    #[cold]
    #[inline(never)]
    fn too_little_named(
        operation: &OperationDeadline,
        remaining: Duration,
        min_budget: Duration,
    ) -> ResilienceError {
        Self::too_little(operation.display_name(), remaining, min_budget)
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
            timer: Timer::Unarmed,
            deadline: self,
        }
    }

    /// [`Deadline::run`] with the deadline in [scope](Deadline::scope) while `fut` is polled:
    /// `fut` is bounded by this deadline, and code inside it takes children of it. This is how
    /// the attribute macros run a function's body.
    ///
    /// ```
    /// use std::time::Duration;
    /// use velocity_policy_runtime::Deadline;
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
    #[inline]
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
            .try_with(|current| current.replace(Some(self)))
            .unwrap_or(None);
        let _restore = Restore(previous);
        f()
    }

    /// The deadline in scope for the current task, if any.
    #[inline]
    pub fn current() -> Option<Self> {
        CURRENT.try_with(Cell::get).ok().flatten()
    }

    /// A child of the current deadline, or, outside any scope, a fresh deadline of `max`: one
    /// clock read, whichever branch.
    #[inline]
    pub fn child_of_current(max: Duration) -> Self {
        let now = Instant::now();
        match Self::current() {
            Some(parent) => parent.child_as_of(now, max),
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
    /// use velocity_policy_runtime::Deadline;
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
    #[doc(hidden)]
    pub struct Scope<F> {
        #[pin]
        fut: F,
        deadline: Deadline,
    }
}

/// Puts the previous deadline back when a poll ends, also when it unwinds.
struct Restore(Option<Deadline>);

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
            .try_with(|current| current.replace(Some(*this.deadline)))
            .unwrap_or(None);
        let _restore = Restore(previous);
        this.fut.poll(cx)
    }
}

pin_project! {
    /// The future returned by [`Deadline::run`].
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    #[doc(hidden)]
    pub struct Run<F> {
        #[pin]
        fut: F,
        #[pin]
        timer: Timer,
        deadline: Deadline,
    }
}

pin_project! {
    /// A [`Run`]'s timer, armed at its future's first `Pending`. Its own tag, not a niche in
    /// the timer's fields: an unarmed timer is then a tag and nothing else, and a `Run` is
    /// made without writing (or copying) the bytes of a timer it may never arm.
    #[derive(Debug)]
    #[project = TimerProj]
    #[repr(u8)]
    enum Timer {
        Unarmed,
        Armed { #[pin] sleep: Sleep },
    }
}

impl Timer {
    /// A timer armed for `at`, made where it is returned (the timer made inside the `Run`'s
    /// poll was moved twice on its way into place).
    #[inline(never)]
    fn armed(at: Instant) -> Self {
        Self::Armed {
            sleep: tokio::time::sleep_until(at),
        }
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
        if let TimerProj::Unarmed = this.timer.as_mut().project() {
            // First Pending: only now is a timer worth arming (a future ready at once arms
            // none). A deadline already past fires on the timer's first poll.
            this.timer.set(Timer::armed(this.deadline.at));
        }
        match this.timer.project() {
            TimerProj::Armed { sleep } => match sleep.poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(this.deadline.exceeded())),
                Poll::Pending => Poll::Pending,
            },
            TimerProj::Unarmed => Poll::Pending,
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

    #[test]
    fn a_granted_budget_keeps_its_nanoseconds_and_whose_it_is_in_one_word() {
        for budget in [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::new(3, 141_592_653),
            Deadline::MAX_BUDGET,
        ] {
            for callers in [false, true] {
                let granted = Granted::new(budget, callers);
                assert_eq!(granted.budget(), budget, "{budget:?} {callers}");
                assert_eq!(granted.callers(), callers, "{budget:?} {callers}");
            }
        }
        // Longer than a day is a day, with the flag intact.
        let longest = Granted::new(Duration::MAX, true);
        assert_eq!(longest.budget(), Deadline::MAX_BUDGET);
        assert!(longest.callers());
        assert!(std::mem::size_of::<Deadline>() <= 24);
    }

    #[tokio::test(start_paused = true)]
    async fn any_deadline_in_scope_is_current_even_the_earliest_and_an_expired_one() {
        assert_eq!(Deadline::current(), None);
        // An instant far back, and an expired deadline with nothing granted.
        let now = Instant::now();
        let far_back = now
            .checked_sub(Duration::from_secs(365 * 24 * 3600))
            .unwrap_or(now);
        let earliest = Deadline::after_from(far_back, Duration::ZERO);
        let expired = Deadline::after(Duration::ZERO);
        for deadline in [earliest, expired, Deadline::after(Duration::from_secs(3))] {
            let seen = deadline.scope(async { Deadline::current() }).await;
            assert_eq!(seen, Some(deadline));
            assert_eq!(deadline.sync_scope(Deadline::current), Some(deadline));
            assert_eq!(Deadline::current(), None, "the scope ends with its poll");
        }
    }
}

/// The two numbers of an operation's one tuned cell.
fn words(config: DeadlineConfig) -> [u64; 2] {
    use crate::tuning::word;
    [word(config.deadline), word(config.min_budget)]
}

/// The deadline and minimum budget of one named operation: the registry's entry an annotated
/// function reads on every call ([`Deadline::for_named`]), so an override can change them while
/// the service runs. Both numbers are published together (one cell, read with no lock):
/// a call reads both from before a reload or both from after it.
///
/// ```
/// use std::time::Duration;
/// use velocity_policy_runtime::deadline::OperationDeadline;
///
/// let search = OperationDeadline::new("shop::search", Duration::from_secs(2), Duration::ZERO);
/// assert_eq!(search.display_name(), "search");
/// assert_eq!(search.current(), (Duration::from_secs(2), Duration::ZERO));
/// ```
pub struct OperationDeadline {
    name: std::sync::Arc<str>,
    compiled: DeadlineConfig,
    numbers: crate::tuning::Tuned<[u64; 2]>,
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
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct OperationSnapshot {
    /// The entry's name: for an annotated function's, the operation's name made unique by
    /// the module path.
    pub name: std::sync::Arc<str>,
    /// The operation's own name, what a dashboard shows.
    pub display_name: std::sync::Arc<str>,
    /// The deadline in use.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "deadline_ms", serialize_with = "crate::json::millis")
    )]
    pub deadline: Duration,
    /// The minimum budget in use.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "min_budget_ms", serialize_with = "crate::json::millis")
    )]
    pub min_budget: Duration,
    /// The deadline compiled in.
    #[cfg_attr(
        feature = "serde",
        serde(
            rename = "compiled_deadline_ms",
            serialize_with = "crate::json::millis"
        )
    )]
    pub compiled_deadline: Duration,
    /// The minimum budget compiled in.
    #[cfg_attr(
        feature = "serde",
        serde(
            rename = "compiled_min_budget_ms",
            serialize_with = "crate::json::millis"
        )
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
        let mut config = DeadlineConfig::DEFAULT.with_min_budget(min_budget);
        config.deadline = deadline;
        Self::with_config(name, config)
    }

    /// The operation `name` (its last `::` segment is the operation's own name), with the
    /// compiled `config`.
    pub fn with_config(name: impl Into<std::sync::Arc<str>>, config: DeadlineConfig) -> Self {
        Self {
            name: name.into(),
            compiled: config,
            numbers: crate::tuning::Tuned::new(words(config)),
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

    /// The deadline and the minimum budget in use now, read together, in nanoseconds.
    #[inline]
    fn words(&self) -> [u64; 2] {
        self.numbers.read()
    }

    /// The deadline and the minimum budget in use now, read together.
    #[inline]
    pub fn current(&self) -> (Duration, Duration) {
        let [deadline, min_budget] = self.words();
        (
            crate::tuning::duration(deadline),
            crate::tuning::duration(min_budget),
        )
    }

    /// The deadline and the minimum budget in use now, as one [`DeadlineConfig`].
    pub fn config(&self) -> DeadlineConfig {
        let (deadline, min_budget) = self.current();
        let mut config = DeadlineConfig::DEFAULT.with_min_budget(min_budget);
        config.deadline = deadline;
        config
    }

    /// The deadline and the minimum budget compiled in.
    pub fn compiled(&self) -> (Duration, Duration) {
        (self.compiled.deadline, self.compiled.min_budget)
    }

    /// The configuration compiled in.
    pub fn compiled_config(&self) -> DeadlineConfig {
        self.compiled
    }

    /// Uses `config`'s deadline and minimum budget from the next call on; true when they
    /// changed.
    #[cfg(feature = "overrides")]
    pub(crate) fn retune(&self, config: DeadlineConfig) -> bool {
        self.numbers.write(words(config))
    }

    /// A point-in-time view, for dashboards.
    pub fn snapshot(&self) -> OperationSnapshot {
        let (deadline, min_budget) = self.current();
        OperationSnapshot {
            name: self.name.clone(),
            display_name: self.display_name().into(),
            deadline,
            min_budget,
            compiled_deadline: self.compiled.deadline,
            compiled_min_budget: self.compiled.min_budget,
        }
    }
}
