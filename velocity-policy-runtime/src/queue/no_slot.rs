//! Where a `#[background(queue = "...")]` function finds its queue, without the `redis`
//! feature: nowhere, so its work runs on the in-process pool. With the feature, `slot.rs` has
//! the same items.

/// Stands in for a function's lookup of its queue: there is none to find.
#[derive(Debug)]
pub(crate) struct Lookup {}

impl Lookup {
    pub(crate) const fn new() -> Self {
        Self {}
    }

    /// Gives `args` back, for the in-process pool.
    #[inline]
    pub(crate) fn enqueue<A: serde_core::Serialize>(
        &'static self,
        _name: &'static str,
        _operation: &'static str,
        args: A,
    ) -> Option<A> {
        Some(args)
    }
}
