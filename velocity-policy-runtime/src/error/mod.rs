//! The three ways a protected call can end badly, told apart by type.
//!
//! - [`ResilienceError`]: the work **never ran**. A breaker was open, a bulkhead was full, the
//!   work was shed, or the budget left was below the operation's minimum. Retrying it inside the
//!   same request is pointless; a fallback is the only useful response.
//! - [`DeadlineExceeded`]: we **stopped waiting**. The work may have run, may have succeeded
//!   unseen, or may still be running.
//! - The function's own error: the work ran and failed.
//!
//! [`CallError`] carries one of the three when a caller wants them in one value.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

mod injected;
mod reason;

pub use injected::InjectedError;
pub use reason::{OpenCause, RefusalReason, ShedReason};

/// Formats a duration for people: `1.5s`, `250ms`, `40µs`, rounded to what matters.
///
/// ```
/// use std::time::Duration;
/// use velocity_policy_runtime::error::Human;
///
/// assert_eq!(Human(Duration::from_micros(499_960)).to_string(), "500ms");
/// assert_eq!(Human(Duration::from_millis(1_500)).to_string(), "1.5s");
/// assert_eq!(Human(Duration::from_secs(120)).to_string(), "120s");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Human(pub Duration);

impl fmt::Display for Human {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        let micros = d.as_micros();
        if micros >= 999_500 {
            // Seconds with up to three decimals, trailing zeros trimmed.
            let millis = (d.as_nanos() + 500_000) / 1_000_000;
            let (secs, frac) = (millis / 1000, millis % 1000);
            if frac == 0 {
                write!(f, "{secs}s")
            } else {
                let frac = format!("{frac:03}");
                write!(f, "{secs}.{}s", frac.trim_end_matches('0'))
            }
        } else if micros >= 1_000 {
            write!(f, "{}ms", (d.as_nanos() + 500_000) / 1_000_000)
        } else if d.is_zero() {
            f.write_str("0ms")
        } else {
            write!(f, "{}µs", micros.max(1))
        }
    }
}

/// Which mechanism refused, as a stable, machine-readable kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum RefusalKind {
    /// A circuit breaker is open: the dependency failed recently or told us to back off.
    BreakerOpen,
    /// A bulkhead had no free slot and no room in its queue, or a queued caller's deadline
    /// passed before a slot freed.
    BulkheadFull,
    /// The shedding decision dropped the work (load or budget); the reason says which.
    Shed,
    /// Less than the operation's minimum useful budget was left, so the work was not started.
    InsufficientBudget,
    /// A rate limiter refused the call.
    RateLimited,
    /// A chaos drill refused the call: injected, not a real refusal. The kind exists in every
    /// build; only a drill (feature `chaos`) refuses with it.
    Injected,
}

impl RefusalKind {
    /// The kind as the stable string used in tracing fields, metrics labels and JSON.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::BreakerOpen => "breaker_open",
            Self::BulkheadFull => "bulkhead_full",
            Self::Shed => "shed",
            Self::InsufficientBudget => "insufficient_budget",
            Self::RateLimited => "rate_limited",
            Self::Injected => "injected",
        }
    }
}

impl fmt::Display for RefusalKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The work never ran: a mechanism refused it before it started.
///
/// It names the mechanism's kind, its name (the breaker's, the bulkhead's, the operation's) and the
/// reason. Retrying it inside the same request spends budget to receive the same answer, so
/// [`retry_within`](crate::retry::retry_within) never does; a fallback is the only useful
/// response.
///
/// It is one pointer wide: the name and the reason live behind one shared allocation, made when
/// a mechanism refuses, so every `Result` that can carry a refusal (and every future's output
/// on its way out through the levels of a call) stays small on the admitted path. Cloning it
/// shares that allocation.
///
/// ```
/// use velocity_policy_runtime::{Bulkhead, RefusalKind};
///
/// let bulkhead = Bulkhead::builder("search").max_concurrent(1).max_queued(0).build();
/// let _held = bulkhead.try_acquire().unwrap();
/// let refusal = bulkhead.try_acquire().unwrap_err();
/// assert_eq!(refusal.kind(), RefusalKind::BulkheadFull);
/// assert_eq!(refusal.name(), "search");
/// assert_eq!(
///     refusal.to_string(),
///     "bulkhead `search` refused the call: all 1 slots busy and all 0 queue places taken"
/// );
/// ```
#[derive(Clone, PartialEq)]
pub struct ResilienceError(Arc<Refusal>);

/// What a [`ResilienceError`] holds, behind its one pointer.
#[derive(PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename = "ResilienceError"))]
struct Refusal {
    name: Arc<str>,
    #[cfg_attr(feature = "serde", serde(flatten))]
    reason: RefusalReason,
}

impl ResilienceError {
    /// A refusal by the mechanism `name` for `reason`.
    pub fn new(name: impl Into<Arc<str>>, reason: RefusalReason) -> Self {
        Self(Arc::new(Refusal {
            name: name.into(),
            reason,
        }))
    }

    /// Which mechanism refused.
    pub fn kind(&self) -> RefusalKind {
        self.0.reason.kind()
    }

    /// The name of the breaker, bulkhead, shedder, limiter or operation that refused.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// Why it refused.
    pub fn reason(&self) -> &RefusalReason {
        &self.0.reason
    }

    /// For a breaker or rate-limit refusal, how long until the mechanism expects to admit
    /// again; useful for a `Retry-After` header on the 503 a refusal becomes.
    pub fn retry_after(&self) -> Option<Duration> {
        match &self.0.reason {
            RefusalReason::BreakerOpen { remaining, .. } => Some(*remaining),
            RefusalReason::RateLimited { retry_after, .. } => *retry_after,
            RefusalReason::Injected { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    fn mechanism(&self) -> &'static str {
        // A bulkhead keeping its free slots for more important requests sheds; the bulkhead
        // is what refused.
        if matches!(
            self.0.reason,
            RefusalReason::Shed(ShedReason::Criticality { .. })
        ) {
            return "bulkhead";
        }
        match self.kind() {
            RefusalKind::BreakerOpen => "breaker",
            RefusalKind::BulkheadFull => "bulkhead",
            RefusalKind::Shed => "shedding for",
            RefusalKind::InsufficientBudget => "operation",
            RefusalKind::RateLimited => "rate limiter",
            RefusalKind::Injected => "chaos",
        }
    }
}

impl fmt::Display for ResilienceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} `{}` refused the call: {}",
            self.mechanism(),
            self.0.name,
            self.0.reason
        )
    }
}

/// As a struct of its name and reason, the way it reads when derived.
impl fmt::Debug for ResilienceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResilienceError")
            .field("name", &self.0.name)
            .field("reason", &self.0.reason)
            .finish()
    }
}

/// The name and the reason's fields, flattened: `{"name": .., "reason": .., ..}`.
#[cfg(feature = "serde")]
impl serde::Serialize for ResilienceError {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl std::error::Error for ResilienceError {}

/// We stopped waiting at the deadline. The work may have run, may have succeeded unseen, or
/// may still be running (a deadline bounds the wait, not the work).
///
/// It holds the budget in nanoseconds, as a [`Deadline`](crate::Deadline) holds it (a budget
/// beyond `u64::MAX` nanoseconds, about 584 years, is held as that), and whether that budget
/// was the **caller's** ([`DeadlineExceeded::is_callers`]): an expiry under a budget the caller
/// shortened says nothing about the dependency, so no breaker counts it and no retry repeats it.
///
/// ```
/// use std::time::Duration;
/// use velocity_policy_runtime::DeadlineExceeded;
///
/// let e = DeadlineExceeded::new(Duration::from_millis(250));
/// assert_eq!(e.to_string(), "stopped waiting after the 250ms budget ran out; the work may have run");
/// let e = e.with_callers(true);
/// assert_eq!(
///     e.to_string(),
///     "stopped waiting after the caller's 250ms budget ran out; the work may have run"
/// );
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DeadlineExceeded {
    #[cfg_attr(
        feature = "serde",
        serde(rename = "budget_ms", serialize_with = "nanos_as_millis")
    )]
    budget: u64,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "is_false"))]
    callers: bool,
}

#[cfg(feature = "serde")]
#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "the signature serde's `skip_serializing_if` calls"
)]
const fn is_false(b: &bool) -> bool {
    !*b
}

impl DeadlineExceeded {
    /// The deadline that had been granted `budget` expired.
    pub const fn new(budget: Duration) -> Self {
        // Whole seconds and the rest in 64-bit arithmetic, saturating, rather than
        // `as_nanos`'s 128-bit product.
        let budget = match budget.as_secs().checked_mul(1_000_000_000) {
            Some(secs) => secs.saturating_add(budget.subsec_nanos() as u64),
            None => u64::MAX,
        };
        Self {
            budget,
            callers: false,
        }
    }

    /// The same expiry, marked as under the caller's budget (`true`) or the service's own.
    #[must_use]
    pub const fn with_callers(self, callers: bool) -> Self {
        Self { callers, ..self }
    }

    /// The budget the expired deadline had been granted.
    pub const fn budget(&self) -> Duration {
        Duration::from_nanos(self.budget)
    }

    /// Whether the expired deadline's budget was decided by the caller (an incoming header, or a
    /// parent deadline that was), not by the service's own configuration: then the expiry is
    /// the caller's. Breakers do not count it as the dependency's failure, retries do not
    /// repeat it, and shared stores never hear of it
    /// ([whose budget it is](crate::Deadline#whose-budget-it-is)).
    pub const fn is_callers(&self) -> bool {
        self.callers
    }
}

/// As a struct of its budget, the way it reads when derived.
impl fmt::Debug for DeadlineExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut f = f.debug_struct("DeadlineExceeded");
        f.field("budget", &self.budget());
        if self.callers {
            f.field("callers", &true);
        }
        f.finish()
    }
}

impl fmt::Display for DeadlineExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whose = if self.callers { "caller's " } else { "" };
        write!(
            f,
            "stopped waiting after the {whose}{} budget ran out; the work may have run",
            Human(self.budget())
        )
    }
}

impl std::error::Error for DeadlineExceeded {}

/// A budget held in nanoseconds, serialized as [`millis`](crate::json::millis) serializes
/// the same `Duration`.
#[cfg(feature = "serde")]
#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "the signature serde's `serialize_with` calls"
)]
fn nanos_as_millis<S: serde::Serializer>(nanos: &u64, s: S) -> Result<S::Ok, S::Error> {
    crate::json::millis(&Duration::from_nanos(*nanos), s)
}

/// One of the three outcomes of a protected call that are not a success.
///
/// Match on it to treat each differently; or, when the function's own error type `E`
/// implements `From<ResilienceError>` and `From<DeadlineExceeded>`, collapse it with
/// [`CallError::into_inner`].
///
/// ```
/// use velocity_policy_runtime::{CallError, DeadlineExceeded, ResilienceError};
/// # use std::time::Duration;
///
/// #[derive(Debug)]
/// enum AppError { Unavailable(ResilienceError), Timeout(DeadlineExceeded), Db(String) }
/// impl From<ResilienceError> for AppError { fn from(e: ResilienceError) -> Self { Self::Unavailable(e) } }
/// impl From<DeadlineExceeded> for AppError { fn from(e: DeadlineExceeded) -> Self { Self::Timeout(e) } }
///
/// let e: CallError<AppError> = DeadlineExceeded::new(Duration::from_secs(1)).into();
/// assert!(e.is_deadline_exceeded());
/// assert!(matches!(e.into_inner(), AppError::Timeout(_)));
/// ```
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError<E> {
    /// The work never ran.
    #[error(transparent)]
    Refused(ResilienceError),
    /// We stopped waiting; the work may have run.
    #[error(transparent)]
    DeadlineExceeded(DeadlineExceeded),
    /// The work ran and failed with its own error.
    #[error("{0}")]
    Failed(E),
}

impl<E> CallError<E> {
    /// True when the work never ran.
    pub const fn is_refusal(&self) -> bool {
        matches!(self, Self::Refused(_))
    }

    /// True when we stopped waiting at a deadline.
    pub const fn is_deadline_exceeded(&self) -> bool {
        matches!(self, Self::DeadlineExceeded(_))
    }

    /// The refusal, when the work never ran.
    pub const fn refusal(&self) -> Option<&ResilienceError> {
        match self {
            Self::Refused(r) => Some(r),
            _ => None,
        }
    }

    /// Collapses the three outcomes into the function's own error type.
    pub fn into_inner(self) -> E
    where
        E: From<ResilienceError> + From<DeadlineExceeded>,
    {
        match self {
            Self::Refused(r) => E::from(r),
            Self::DeadlineExceeded(d) => E::from(d),
            Self::Failed(e) => e,
        }
    }

    /// A run under a deadline ([`Deadline::run`](crate::Deadline::run)) as a success or a
    /// `CallError`: the work's own error, or the expiry.
    ///
    /// ```
    /// use std::time::Duration;
    /// use velocity_policy_runtime::{CallError, DeadlineExceeded};
    ///
    /// let expired: Result<Result<u8, &str>, _> = Err(DeadlineExceeded::new(Duration::from_secs(1)));
    /// assert!(CallError::from_run(expired).unwrap_err().is_deadline_exceeded());
    /// assert_eq!(CallError::from_run(Ok(Ok::<u8, &str>(7))), Ok(7));
    /// ```
    #[inline]
    pub fn from_run<T>(ran: Result<Result<T, E>, DeadlineExceeded>) -> Result<T, Self> {
        match ran {
            Ok(result) => result.map_err(Self::Failed),
            Err(expired) => Err(Self::DeadlineExceeded(expired)),
        }
    }

    /// Maps the function's own error, leaving refusals and expiries as they are.
    pub fn map_failed<F>(self, f: impl FnOnce(E) -> F) -> CallError<F> {
        match self {
            Self::Refused(r) => CallError::Refused(r),
            Self::DeadlineExceeded(d) => CallError::DeadlineExceeded(d),
            Self::Failed(e) => CallError::Failed(f(e)),
        }
    }
}

impl<E> From<ResilienceError> for CallError<E> {
    fn from(e: ResilienceError) -> Self {
        Self::Refused(e)
    }
}

impl<E> From<DeadlineExceeded> for CallError<E> {
    fn from(e: DeadlineExceeded) -> Self {
        Self::DeadlineExceeded(e)
    }
}

#[cfg(test)]
mod tests {
    use std::mem::size_of;

    use super::*;

    /// Every level of a call moves its `Poll<Result<T, E>>` out, with `E` carrying these: on
    /// the admitted path they are only size, so they are kept to a word each.
    #[test]
    fn a_refusal_and_an_expiry_are_one_word_each() {
        assert_eq!(size_of::<ResilienceError>(), size_of::<usize>());
        assert_eq!(size_of::<Result<(), ResilienceError>>(), size_of::<usize>());
        // The budget and whose it was; the flag's spare values hold `CallError`'s discriminant.
        assert_eq!(size_of::<DeadlineExceeded>(), 2 * size_of::<u64>());
        assert_eq!(size_of::<CallError<std::io::Error>>(), 2 * size_of::<u64>());
        assert_eq!(
            size_of::<Result<u64, CallError<std::io::Error>>>(),
            2 * size_of::<u64>()
        );
    }

    #[test]
    fn an_expiry_holds_its_budget_to_the_nanosecond_and_saturates_past_u64_nanoseconds() {
        let budget = Duration::new(3, 141_592_653);
        assert_eq!(DeadlineExceeded::new(budget).budget(), budget);
        assert_eq!(
            DeadlineExceeded::new(Duration::MAX).budget(),
            Duration::from_nanos(u64::MAX)
        );
        assert_eq!(
            format!("{:?}", DeadlineExceeded::new(Duration::from_millis(250))),
            "DeadlineExceeded { budget: 250ms }"
        );
    }

    #[test]
    fn a_refusal_reads_as_a_struct_of_its_name_and_reason_and_its_clones_share_one_reason() {
        let refusal = ResilienceError::new(
            "search",
            RefusalReason::BulkheadFull {
                max_concurrent: 1,
                max_queued: 0,
            },
        );
        assert_eq!(
            format!("{refusal:?}"),
            "ResilienceError { name: \"search\", reason: BulkheadFull { max_concurrent: 1, max_queued: 0 } }"
        );
        let copy = refusal.clone();
        assert_eq!(copy, refusal);
        assert!(std::ptr::eq(copy.reason(), refusal.reason()));
    }
}
