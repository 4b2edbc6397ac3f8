//! The numbers of a named mechanism, changeable while it runs (by the overrides' reload,
//! feature `overrides`), read on the hot path with no lock and no allocation.
//!
//! Each mechanism keeps the settings an override may change (a breaker's rule and cooldown, a
//! retry's attempts and timeouts, an operation's deadline and minimum budget, a shedder's
//! thresholds) in one [`Tuned`] cell: crossbeam's `AtomicCell`, a sequence lock from a
//! well-kept crate. A reader never writes, so readers on many cores never contend, and it reads
//! the old settings or the new ones, never half of each; a writer (the reload, serialised)
//! publishes them all at once. A call reads its settings once, where it starts, so an in-flight
//! call finishes on the settings it started with.
//!
//! This is the one reload cell: every mechanism's settings live in one, and nothing else is
//! swapped by a reload (a breaker's counting state, which a new rule starts afresh, is state,
//! not a setting). `arc-swap` was the other candidate: a load costs about 11 ns on this
//! project's machines (a full fence), against under a nanosecond for this cell's read.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_utils::atomic::AtomicCell;

/// Settings published together.
pub(crate) struct Tuned<T> {
    cell: AtomicCell<T>,
    /// Serialises writers (reloads), never taken by readers.
    writer: Mutex<()>,
}

impl<T: Copy + PartialEq + std::fmt::Debug> std::fmt::Debug for Tuned<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.read().fmt(f)
    }
}

impl<T: Copy + PartialEq> Tuned<T> {
    /// A cell holding `settings`.
    pub(crate) fn new(settings: T) -> Self {
        Self {
            cell: AtomicCell::new(settings),
            writer: Mutex::new(()),
        }
    }

    /// The settings, all from one publication.
    #[inline]
    pub(crate) fn read(&self) -> T {
        self.cell.load()
    }

    /// Publishes `settings`, all at once for every reader; true when they differ from the
    /// current ones.
    #[cfg_attr(
        not(any(test, feature = "overrides")),
        expect(dead_code, reason = "only a reload writes after the build")
    )]
    pub(crate) fn write(&self, settings: T) -> bool {
        let _writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        if self.read() == settings {
            return false;
        }
        self.cell.store(settings);
        true
    }
}

/// A duration as a word: nanoseconds, saturating ([`saturating_nanos`]).
pub(crate) use crate::window::saturating_nanos as word;

/// A word as a duration.
#[inline]
pub(crate) fn duration(word: u64) -> Duration {
    Duration::from_nanos(word)
}

/// Where the overridden numbers of the snapshot came from: the overrides in force (feature
/// `overrides`), each value with its file, line and column and when it was applied. A value
/// not listed is the compiled one.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct OverridesSnapshot {
    /// The running environment (`POLICY_ENV`), when overrides were loaded for one.
    pub environment: Option<Arc<str>>,
    /// The directory the overrides are read from.
    pub dir: Option<Arc<str>>,
    /// Sets applied since the start, the startup's included.
    pub applied: u64,
    /// Sets refused since the start.
    pub refusals: u64,
    /// When the set in force was applied, in milliseconds since the Unix epoch.
    pub applied_at_unix_ms: Option<u64>,
    /// Every overridden value of the set in force, in file order.
    pub settings: Vec<OverriddenSetting>,
    /// The last set refused, while the set in force is older than it.
    pub refused: Option<RefusedOverrides>,
    /// When the set in force came from the fleet (published through Redis, features `redis`
    /// and `overrides`) rather than from the files of `dir`: who published it, and when.
    pub fleet: Option<FleetOrigin>,
}

/// Where a fleet's override set came from: published through the Redis store.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct FleetOrigin {
    /// The set's version in Redis (one more for each set published).
    pub version: u64,
    /// The publishing instance's id.
    pub publisher: Arc<str>,
    /// When it was published, in milliseconds since the Unix epoch (the publisher's clock).
    pub published_at_unix_ms: u64,
}

/// One value an override file changed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct OverriddenSetting {
    /// The stanza: `operation`, `breaker`, `retry`, `bulkhead` or `shedding`.
    pub kind: Arc<str>,
    /// What it names (`None` for `shedding`).
    pub name: Option<Arc<str>>,
    /// The setting: `deadline`, `cooldown`, `deferred`, ...
    pub setting: Arc<str>,
    /// The value in force, as written (`800ms`).
    pub value: Arc<str>,
    /// The compiled value it replaces, as written; `None` when that was the default.
    pub compiled: Option<Arc<str>>,
    /// The override file.
    pub file: Arc<str>,
    /// Its line, from 1.
    pub line: u32,
    /// Its column, from 1.
    pub column: u32,
}

/// A set of overrides the validator refused: the set in force stayed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct RefusedOverrides {
    /// When it was refused, in milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
    /// Each error's stable code (`policy::attempt-timeout-exceeds-deadline`).
    pub codes: Vec<Arc<str>>,
    /// The errors as `policy check` renders them: file, line, column, snippet and help.
    pub rendered: Arc<str>,
    /// When the refused set was the fleet's, where it came from.
    pub fleet: Option<FleetOrigin>,
}

/// Milliseconds since the Unix epoch, now.
#[cfg_attr(
    not(feature = "overrides"),
    expect(dead_code, reason = "only the overrides stamp when a set was applied")
)]
pub(crate) fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    use super::*;

    #[test]
    fn readers_never_see_half_a_publication() {
        let cell = Arc::new(Tuned::new([0u64; 4]));
        let stop = Arc::new(AtomicBool::new(false));
        // Each reader's count of reads, so the writer goes on until both have read while it
        // wrote: on a loaded machine a reader may not be scheduled before 20,000 writes end.
        let reads: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let start = Arc::new(std::sync::Barrier::new(3));
        let readers: Vec<_> = (0..2)
            .map(|i| {
                let (cell, stop, reads, start) =
                    (cell.clone(), stop.clone(), reads.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    while !stop.load(Ordering::Relaxed) {
                        let words = cell.read();
                        assert!(words.iter().all(|w| *w == words[0]), "torn: {words:?}");
                        reads[i].fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        start.wait();
        let mut n = 0u64;
        while n < 20_000 || reads.iter().any(|r| r.load(Ordering::Relaxed) < 100) {
            n += 1;
            assert!(cell.write([n; 4]));
        }
        stop.store(true, Ordering::Relaxed);
        for reader in readers {
            assert!(reader.join().is_ok(), "a reader saw a torn publication");
        }
        assert!(reads.iter().all(|r| r.load(Ordering::Relaxed) >= 100));
        assert_eq!(cell.read(), [n; 4]);
        assert!(!cell.write([n; 4]), "the same numbers publish nothing");
    }
}
