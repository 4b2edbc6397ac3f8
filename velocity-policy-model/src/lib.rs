//! The words `policy`'s language and runtime share, defined once.
//!
//! The `.policy` language (`velocity-policy-lang`, used by the attribute macros at compile time) and the
//! runtime (`velocity-policy-runtime`, in every service) each need a few of the same concepts: the class
//! of a piece of work, what a rate limiter decides when its store fails, a durable queue's
//! default numbers ([`queue_defaults`]), and one configuration type per mechanism
//! ([`BreakerConfig`], ...), whose fields and defaults are documented once, here, with a table
//! of its optional numbers ([`Setting`]) that both front ends and the overrides read. Each is one
//! type, here, with one name and one spelling in the language ([`WorkClass::as_str`],
//! [`FailMode::as_str`]), so the two crates cannot drift apart.
//!
//! This crate has no dependencies (with the `serde` feature, the runtime's snapshots serialize
//! these types). The runtime does not depend on the language: that crate parses text (pest,
//! miette) and belongs to compile time only.
//!
//! ```
//! use velocity_policy_model::{Criticality, FailMode, WorkClass};
//!
//! assert_eq!(WorkClass::from_name("deferred"), Some(WorkClass::Deferred));
//! assert_eq!(WorkClass::Background.to_string(), "background");
//!
//! assert_eq!(FailMode::from_name("local"), Some(FailMode::Local));
//! assert_eq!(FailMode::Closed.as_str(), "closed");
//!
//! assert_eq!(Criticality::from_name("SHEDDABLE_PLUS"), Some(Criticality::SheddablePlus));
//! assert!(Criticality::CriticalPlus > Criticality::Critical);
//! ```
//!
//! # Feature flags
//!
#![doc = include_str!("features.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

use std::fmt;

pub mod breaker;
pub mod bulkhead;
pub mod deadline;
pub mod hedge;
#[cfg(feature = "serde")]
mod json;
pub mod rate_limit;
pub mod retry;
pub mod setting;
pub mod shedding;

pub use breaker::{BreakerConfig, OpenAfter, Sharing};
pub use bulkhead::{AdaptiveLimit, BulkheadConfig};
pub use deadline::DeadlineConfig;
pub use hedge::{HedgeConfig, HedgeDelay};
pub use rate_limit::RateLimitConfig;
pub use retry::{AllowanceConfig, Backoff, RetryConfig};
pub use setting::{Number, Range, Setting, Unit};
pub use shedding::SheddingConfig;

/// The three classes of work, in the order they are dropped last to first.
///
/// | class | when it runs | may be shed for load | must be idempotent |
/// |---|---|---|---|
/// | critical | before the response | never (a full bulkhead refuses it visibly) | only if retried |
/// | deferred | after the response is finished | yes | yes (at-least-once) |
/// | background | on a bounded background pool | yes, first | yes |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum WorkClass {
    /// Before the response: authentication, authorization, validation, the canonical write.
    /// Never shed for load.
    Critical,
    /// After the response is finished: analytics, indexing, activity events, notifications.
    /// Shed under load; delivered at least once.
    Deferred,
    /// On a bounded background pool: embeddings, media processing, large projections. Shed
    /// first.
    Background,
}

impl WorkClass {
    /// Every class, critical first.
    pub const ALL: [WorkClass; 3] = [Self::Critical, Self::Deferred, Self::Background];

    /// The class as the language writes it, and as tracing fields, metric labels and JSON
    /// carry it: `critical`, `deferred`, `background`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Critical => "critical",
            Self::Deferred => "deferred",
            Self::Background => "background",
        }
    }

    /// The class written `name`, if there is one.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|class| class.as_str() == name)
    }
}

impl fmt::Display for WorkClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How much a request matters when there is not room for all of them: the levels of Google's
/// SRE book (chapter 21, "Handling Overload"), carried with the request like its deadline and
/// chosen per route or per call. Under pressure, work is refused in order of criticality: a
/// level is turned away only when admitting it would take room the levels above it need.
///
/// | level | meaning |
/// |---|---|
/// | `critical_plus` | the most important requests: their failure is user-visible and severe |
/// | `critical` | the default: a request a user waits for |
/// | `sheddable_plus` | may fail partly; a retry later is fine (a batch job's read, a prefetch) |
/// | `sheddable` | may fail; nobody waits for it (analytics, speculative work) |
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Criticality {
    /// May fail; nobody waits for it. Turned away first.
    Sheddable,
    /// May fail partly; a retry later is fine.
    SheddablePlus,
    /// A request a user waits for: the default.
    #[default]
    Critical,
    /// The most important requests. Never turned away for the sake of another level.
    CriticalPlus,
}

impl Criticality {
    /// Every level, most important first.
    pub const ALL: [Criticality; 4] = [
        Self::CriticalPlus,
        Self::Critical,
        Self::SheddablePlus,
        Self::Sheddable,
    ];

    /// The level as the language, the `x-criticality` header, tracing fields, metric labels and
    /// JSON write it: `critical_plus`, `critical`, `sheddable_plus`, `sheddable`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::CriticalPlus => "critical_plus",
            Self::Critical => "critical",
            Self::SheddablePlus => "sheddable_plus",
            Self::Sheddable => "sheddable",
        }
    }

    /// The level written `name` (as [`as_str`](Self::as_str) writes it, or in upper case as
    /// gRPC metadata often carries it: `CRITICAL_PLUS`), if there is one.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        let name = name.trim();
        Self::ALL
            .into_iter()
            .find(|level| level.as_str().eq_ignore_ascii_case(name))
    }

    /// The level's place, 0 for `sheddable` to 3 for `critical_plus`: an index for per-level
    /// counters.
    #[must_use]
    pub const fn rank(self) -> usize {
        self as usize
    }

    /// Whether this level may be turned away to keep room for more important ones (the two
    /// sheddable levels).
    #[must_use]
    pub const fn is_sheddable(self) -> bool {
        matches!(self, Self::Sheddable | Self::SheddablePlus)
    }
}

impl fmt::Display for Criticality {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a rate limiter decides when its shared store fails, chosen apart for a store that is
/// slow (`on_timeout`) and one that is down (`on_error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum FailMode {
    /// Admit the call: for a limiter guarding best-effort work, where failing closed would
    /// merely delete a feature.
    Open,
    /// Refuse the call: for a limiter guarding unbounded work, where failing open would
    /// unleash it.
    Closed,
    /// Decide from this instance's own rate: the fleet-wide limit degrades to a per-instance
    /// one, neither all admitted nor all refused.
    Local,
}

impl FailMode {
    /// Every mode.
    pub const ALL: [FailMode; 3] = [Self::Open, Self::Closed, Self::Local];

    /// The mode as the language writes it: `open`, `closed`, `local`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Closed => "closed",
            Self::Local => "local",
        }
    }

    /// The mode written `name`, if there is one.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|mode| mode.as_str() == name)
    }
}

impl fmt::Display for FailMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A durable queue's numbers when neither a `queue NAME { ... }` stanza nor a builder call sets
/// them: the runtime's `TaskQueueBuilder` and `WorkerBuilder` start from these, and
/// `policy explain` prints them for an undeclared queue.
pub mod queue_defaults {
    use std::time::Duration;

    /// Unfinished tasks a queue's stream may hold (`max_len`).
    pub const MAX_LEN: u32 = 10_000;
    /// How long a delivered task may stay unacknowledged before another worker claims it
    /// (`visibility_timeout`).
    pub const VISIBILITY_TIMEOUT: Duration = Duration::from_secs(30);
    /// Deliveries after which an unfinished task is dead-lettered (`max_deliveries`).
    pub const MAX_DELIVERIES: u32 = 5;
    /// The bound on one delivery's run (`task_deadline`), at most
    /// [`task_deadline_bound`] of the visibility timeout.
    pub const TASK_DEADLINE: Duration = Duration::from_secs(10);
    /// Tasks one instance's worker runs at once (`concurrency`): the background pool's.
    pub const CONCURRENCY: u32 = 4;

    /// The longest task deadline a visibility timeout allows: four fifths of it. A delivery
    /// still running when another worker may claim its task would run twice at once; the
    /// fifth left over absorbs the acknowledgement's round trip and the gap between a
    /// worker's clock and Redis's. The validator refuses more in a `.policy` file, and the
    /// runtime's worker lowers a longer one to it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use velocity_policy_model::queue_defaults::task_deadline_bound;
    ///
    /// assert_eq!(task_deadline_bound(Duration::from_secs(30)), Duration::from_secs(24));
    /// ```
    #[must_use]
    pub fn task_deadline_bound(visibility_timeout: Duration) -> Duration {
        visibility_timeout / 5 * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_reads_back_as_its_value() {
        for class in WorkClass::ALL {
            assert_eq!(WorkClass::from_name(class.as_str()), Some(class));
        }
        for mode in FailMode::ALL {
            assert_eq!(FailMode::from_name(mode.as_str()), Some(mode));
        }
        assert_eq!(WorkClass::from_name("Critical"), None);
        assert_eq!(FailMode::from_name("opened"), None);
    }
}

/// The crate docs' "Feature flags" table is checked in (`src/features.md`) rather than rendered
/// by `document-features` in every build, whose proc macro would be one more crate in a
/// user's first build; this keeps it what `document_features!()` renders from the `## `
/// comments in `Cargo.toml`. `POLICY_BLESS=1 cargo test -p velocity-policy-model --lib features_table`
/// rewrites it.
#[cfg(test)]
#[test]
fn the_features_table_is_what_cargo_toml_says() {
    let rendered = document_features::document_features!();
    if std::env::var_os("POLICY_BLESS").is_some() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/features.md");
        assert!(
            std::fs::write(path, rendered).is_ok(),
            "cannot write {path}"
        );
    }
    assert_eq!(
        include_str!("features.md"),
        rendered,
        "src/features.md is not the table Cargo.toml's `## ` comments give: rerun with POLICY_BLESS=1"
    );
}
