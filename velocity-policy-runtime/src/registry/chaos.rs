//! The registry's drills (feature `chaos`): what the feature keeps in the [`Registry`] and
//! the methods it adds. Here rather than in [`chaos`](crate::chaos), so that the registry names
//! the drills' module and that module names nothing of the registry.

use std::fmt;

use super::{Map, Registry, get_or_insert, read};
use crate::chaos::{Chaos, ChaosSnapshot, error_with};

/// The registry's drills, by name (its [`parts`](super::parts) with `chaos`).
#[derive(Default)]
pub(crate) struct Drills(Map<Chaos>);

impl fmt::Debug for Drills {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(read(&self.0).keys()).finish()
    }
}

/// The registry's drills: what `chaos` adds to [`Registry`].
impl Registry {
    /// The chaos `name` (feature `chaos`): the run-time switch of a drill, shared with every
    /// attribute, `.policy` operation and layer that names it. Made off and empty if nothing
    /// declared it yet; a later declaration then fills in its faults unless a switch set some.
    ///
    /// ```
    /// use velocity_policy_runtime::Registry;
    /// use velocity_policy_runtime::chaos::{Fault, FaultKind, Latency};
    /// use std::time::Duration;
    ///
    /// let drill = Registry::global().chaos("search_drill");
    /// drill.set(Fault::Latency(Latency::Fixed { delay: Duration::from_millis(300) }), 0.25);
    /// drill.enable();
    /// assert!(Registry::global().chaos("search_drill").is_on());
    /// // On, and still injecting nothing until the process arms drills: `chaos::arm()`.
    /// drill.set_rate(FaultKind::Latency, 0.5);
    /// drill.disable();
    /// ```
    pub fn chaos(&self, name: &str) -> Chaos {
        get_or_insert(&self.drills.0, name, |name| {
            let chaos = Chaos::bare(name);
            self.tunings.apply_to_chaos(&chaos);
            chaos
        })
    }

    /// Registers how the chaos `name` builds the function's own error for
    /// [`Fault::Error`](crate::chaos::Fault::Error) (feature `chaos`): the drill is made off
    /// and empty if nothing declared it yet, as [`chaos`](Self::chaos) does.
    ///
    /// ```
    /// use velocity_policy_runtime::Registry;
    ///
    /// #[derive(Debug)]
    /// enum SearchError { Injected }
    ///
    /// Registry::global().chaos_error_for("search_drill", || SearchError::Injected);
    /// ```
    pub fn chaos_error_for<E, F>(&self, name: &str, build: F)
    where
        E: Send + 'static,
        F: Fn() -> E + Send + Sync + 'static,
    {
        error_with(&self.chaos(name), build);
    }

    /// The chaos `name` if anything made it.
    pub fn find_chaos(&self, name: &str) -> Option<Chaos> {
        read(&self.drills.0).get(name).cloned()
    }

    /// Every drill the registry holds, by name.
    #[cfg_attr(
        not(feature = "overrides"),
        expect(dead_code, reason = "a reload of the overrides retunes every drill")
    )]
    pub(crate) fn drills(&self) -> Vec<Chaos> {
        read(&self.drills.0).values().cloned().collect()
    }

    /// Every drill's state, by name: faults, rates, on or off, and what each injected. The
    /// dashboard serves them as its JSON's `chaos`.
    pub fn chaos_snapshots(&self) -> Vec<ChaosSnapshot> {
        read(&self.drills.0).values().map(Chaos::snapshot).collect()
    }
}
