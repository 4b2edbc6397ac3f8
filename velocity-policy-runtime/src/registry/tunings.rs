//! The numbers an override set puts in force (feature `overrides`): kept by the registry (its
//! [`parts`](super::parts) with `overrides`), applied to each named mechanism it builds and,
//! at a reload, to those already built. The overrides work them out from the merged `.policy`
//! set; the registry only applies them. Here rather than in [`overrides`](crate::overrides),
//! which holds a registry to apply them to: the overrides name the registry, and the registry
//! names nothing of them.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use super::{OverridesSnapshot, Registry, read, write};
use crate::breaker::{Breaker, BreakerConfig};
use crate::bulkhead::{Bulkhead, BulkheadConfig};
use crate::deadline::{DeadlineConfig, OperationDeadline};
use crate::observe::short_name;
use crate::retry::{RetryConfig, RetryPolicy};
use crate::shedding::{Shedder, Thresholds};

/// The numbers a valid set puts in force, per mechanism: applied to those built now
/// ([`Registry::put_tunings`]) and to each one built later, as it is built.
#[derive(Debug, Default)]
pub(crate) struct Tunings {
    /// A breaker's configuration in force (its sharing is not tuned: the breaker keeps its own).
    pub(crate) breakers: BTreeMap<String, BreakerConfig>,
    /// A retry policy's configuration in force (its allowance is not tuned: it keeps its own).
    pub(crate) retries: BTreeMap<String, RetryConfig>,
    /// A bulkhead's configuration in force (of which a running bulkhead changes its slot count).
    pub(crate) bulkheads: BTreeMap<String, BulkheadConfig>,
    /// By the operation's own name.
    pub(crate) operations: BTreeMap<String, DeadlineConfig>,
    /// By the operation's own name.
    pub(crate) shedders: BTreeMap<String, Thresholds>,
    /// Drills (feature `chaos`), by name: their faults and whether they are on.
    #[cfg(feature = "chaos")]
    pub(crate) chaos: BTreeMap<String, crate::chaos::ChaosSettings>,
}

impl Tunings {
    /// A drill an override names: its faults at the merged rates, on or off as the merged
    /// stanza says (an override is a switch made at run time).
    #[cfg(feature = "chaos")]
    pub(crate) fn apply_to_chaos(&self, chaos: &crate::chaos::Chaos) {
        if let Some(settings) = self.chaos.get(chaos.name()) {
            for (fault, rate) in settings.faults.iter().flatten() {
                chaos.set(*fault, *rate);
            }
            if settings.enabled {
                chaos.enable();
            } else {
                chaos.disable();
            }
        }
    }

    pub(crate) fn apply_to_breaker(&self, breaker: &Breaker) {
        if let Some(&config) = self.breakers.get(breaker.name()) {
            breaker.retune(config);
        }
    }

    pub(crate) fn apply_to_retry(&self, retry: &RetryPolicy) {
        if let Some(&config) = self.retries.get(retry.name()) {
            retry.retune(config);
        }
    }

    pub(crate) fn apply_to_bulkhead(&self, bulkhead: &Bulkhead) {
        if let Some(config) = self.bulkheads.get(bulkhead.name())
            && bulkhead.max_concurrent() != config.max_concurrent
        {
            bulkhead.set_max_concurrent(config.max_concurrent);
        }
    }

    pub(crate) fn apply_to_operation(&self, operation: &OperationDeadline) {
        if let Some(&config) = self.operations.get(operation.display_name()) {
            operation.retune(config);
        }
    }

    pub(crate) fn apply_to_shedder(&self, shedder: &Shedder) {
        if let Some(&thresholds) = self.shedders.get(short_name(shedder.name())) {
            shedder.retune(thresholds);
        }
    }
}

/// The overrides in force in one registry: applied to each mechanism as the registry builds it
/// (a hook of the registry's `new` mechanisms), and to those built when a reload puts new ones
/// in force ([`Registry::put_tunings`]).
#[derive(Debug, Default)]
pub(crate) struct InForce(RwLock<Arc<Tunings>>);

impl InForce {
    pub(crate) fn apply_to_breaker(&self, breaker: &Breaker) {
        read(&self.0).apply_to_breaker(breaker);
    }

    pub(crate) fn apply_to_bulkhead(&self, bulkhead: &Bulkhead) {
        read(&self.0).apply_to_bulkhead(bulkhead);
    }

    pub(crate) fn apply_to_retry(&self, retry: &RetryPolicy) {
        read(&self.0).apply_to_retry(retry);
    }

    pub(crate) fn apply_to_shedder(&self, shedder: &Shedder) {
        read(&self.0).apply_to_shedder(shedder);
    }

    pub(crate) fn apply_to_operation(&self, operation: &OperationDeadline) {
        read(&self.0).apply_to_operation(operation);
    }

    #[cfg(feature = "chaos")]
    pub(crate) fn apply_to_chaos(&self, chaos: &crate::chaos::Chaos) {
        read(&self.0).apply_to_chaos(chaos);
    }
}

/// What `overrides` adds to [`Registry`]: putting a set in force.
impl Registry {
    /// Puts `tunings` in force: applied now to every mechanism they name that is built, and to
    /// the others when they are built. Only the overrides call this, after the validator
    /// accepted the set.
    pub(crate) fn put_tunings(&self, tunings: Tunings) {
        let tunings = Arc::new(tunings);
        // In force for what is built from now on, before the built ones change, so a mechanism
        // built in between gets the new numbers too.
        *write(&self.tunings.0) = tunings.clone();
        for breaker in read(&self.breakers).values() {
            tunings.apply_to_breaker(breaker);
        }
        for retry in read(&self.retries).values() {
            tunings.apply_to_retry(retry);
        }
        for shedder in read(&self.shedders).values() {
            tunings.apply_to_shedder(shedder);
        }
        for operation in read(&self.operations).values() {
            tunings.apply_to_operation(operation);
        }
        for bulkhead in read(&self.bulkheads).values() {
            tunings.apply_to_bulkhead(bulkhead);
        }
        #[cfg(feature = "chaos")]
        for chaos in self.drills() {
            tunings.apply_to_chaos(&chaos);
        }
    }

    /// Replaces what the snapshot says of the overrides.
    pub(crate) fn set_overrides_snapshot(&self, change: impl FnOnce(&mut OverridesSnapshot)) {
        change(&mut write(&self.overrides));
    }
}
