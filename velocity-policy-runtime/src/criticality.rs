//! How much does this request matter when there is not room for all of them? Its
//! [`Criticality`], carried with the request like its deadline.
//!
//! A bulkhead full of work that may fail (analytics, prefetches, a batch job's reads) refuses the
//! request a user is waiting for, unless something tells them apart. The levels are the SRE
//! book's (chapter 21): `critical_plus`, `critical` (the default), `sheddable_plus`, `sheddable`.
//! A level is in scope while a request's futures are polled ([`scope`], or
//! [`CriticalityLayer`](crate::layer::CriticalityLayer) per route, from the `x-criticality`
//! header within the route's bound), and the [bulkhead](crate::bulkhead) admits by it:
//!
//! - nothing is turned away at a fixed fraction: while there is room for everyone, every level
//!   is admitted;
//! - a level is turned away (a [`Shed`](crate::RefusalKind::Shed) refusal, reason
//!   `criticality`) only when admitting it would take a slot that the levels above it are
//!   measured to need and could not otherwise get: each level's recent peak of calls in
//!   flight, less what it holds now, less the bulkhead's free queue places (work above that
//!   finds every slot busy waits in line, and the line is theirs);
//! - sheddable levels never wait in a bulkhead's queue, so a freed slot goes to a caller that
//!   matters.
//!
//! So with a queue (`max_queued = max_concurrent`, as the facade's `velocity_policy::guide::sizing`
//! advises), sheddable work uses every slot the levels above leave idle, and a critical
//! request that finds them all busy waits for the next one ahead of every sheddable request; with no queue
//! (`max_queued = 0`), the slots the levels above need are kept free for them.
//!
//! The cost when nobody uses it: a bulkhead whose calls are all `critical` counts nothing per
//! level and reads one flag per admission. It counts from its first call of another level on,
//! so the levels' peaks are learned from then (in the first moments of mixed traffic, before a
//! peak is seen, sheddable work may take slots critical work then waits for).
//!
//! The level is read when a bulkhead's `acquire` is *called*: call it inside the scope
//! (`scope(level, async { bulkhead.acquire(&deadline).await })`), as the layers and the
//! attributes do.
//!
//! ```
//! use velocity_policy_runtime::criticality::{self, Criticality};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! assert_eq!(criticality::current(), Criticality::Critical);
//! let seen = criticality::scope(Criticality::Sheddable, async { criticality::current() }).await;
//! assert_eq!(seen, Criticality::Sheddable);
//! # }
//! ```

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
pub use velocity_policy_model::Criticality;

/// The header that carries a request's criticality between services: `x-criticality:
/// sheddable`.
pub const CRITICALITY_HEADER: &str = "x-criticality";

thread_local! {
    /// The level in scope while a [`Scoped`] future is polled on this thread (`None` outside
    /// every scope: [`Criticality::Critical`]).
    static CURRENT: Cell<Option<Criticality>> = const { Cell::new(None) };
}

/// The level of the request being served on this task: the one in scope, or
/// [`Criticality::Critical`] outside every scope.
#[inline]
pub fn current() -> Criticality {
    in_scope().unwrap_or_default()
}

/// Runs `fut` with `level` in scope (only while it is polled, as a deadline's scope: a task
/// `fut` spawns does not inherit it).
pub fn scope<F: Future>(level: Criticality, fut: F) -> Scoped<F> {
    Scoped { fut, level }
}

/// Runs `f` with `level` in scope: for a tower service's `call`.
pub fn sync_scope<R>(level: Criticality, f: impl FnOnce() -> R) -> R {
    let _restore = Restore(enter(level));
    f()
}

/// The level explicitly in scope, if any.
#[inline]
pub(crate) fn in_scope() -> Option<Criticality> {
    CURRENT.try_with(Cell::get).ok().flatten()
}

fn enter(level: Criticality) -> Option<Criticality> {
    CURRENT
        .try_with(|current| current.replace(Some(level)))
        .unwrap_or(None)
}

/// Puts the previous level back when a poll ends, also when it unwinds.
struct Restore(Option<Criticality>);

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = CURRENT.try_with(|current| current.set(self.0));
    }
}

pin_project! {
    /// The future returned by [`scope`]: `fut`, polled with its level in scope.
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct Scoped<F> {
        #[pin]
        fut: F,
        level: Criticality,
    }
}

impl<F: Future> Future for Scoped<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _restore = Restore(enter(*this.level));
        this.fut.poll(cx)
    }
}

/// A level from a header value (`sheddable`, `SHEDDABLE_PLUS`), if it names one.
///
/// ```
/// use velocity_policy_runtime::criticality::{Criticality, parse_header};
///
/// assert_eq!(parse_header("sheddable_plus"), Some(Criticality::SheddablePlus));
/// assert_eq!(parse_header(" CRITICAL "), Some(Criticality::Critical));
/// assert_eq!(parse_header("urgent"), None);
/// ```
pub fn parse_header(value: &str) -> Option<Criticality> {
    Criticality::from_name(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_level_is_in_scope_only_while_its_future_is_polled() {
        assert_eq!(current(), Criticality::Critical);
        let inner = scope(Criticality::SheddablePlus, async {
            let outer = current();
            let nested = scope(Criticality::Sheddable, async { current() }).await;
            (outer, nested, current())
        })
        .await;
        assert_eq!(
            inner,
            (
                Criticality::SheddablePlus,
                Criticality::Sheddable,
                Criticality::SheddablePlus
            )
        );
        assert_eq!(current(), Criticality::Critical);
        assert_eq!(
            sync_scope(Criticality::CriticalPlus, current),
            Criticality::CriticalPlus
        );
        assert_eq!(in_scope(), None);
    }
}
