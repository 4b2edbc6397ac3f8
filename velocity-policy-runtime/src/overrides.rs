//! Overrides per environment and live reload (feature `overrides`): the `.policy` files of the
//! running environment change the numbers of the compiled policy, checked by the same validator
//! as `policy check`, before the first call and again at each reload.
//!
//! # Two layers of truth
//!
//! The compiled policy (the crate's `policies/*.policy`, which the attribute macros read) is
//! the baseline, and keeps every structural rule at compile time: which operations are
//! idempotent, their classes, which mechanisms an operation uses, its fallback, how a breaker
//! is shared. An environment's files, `policies/<env>/*.policy` with `<env>` from the
//! [`POLICY_ENV`](ENV_VAR) environment variable, change numbers only:
//!
//! | stanza | what an override may set |
//! |---|---|
//! | `operation NAME` | `deadline`, `min_budget`, `shed_at` |
//! | `breaker NAME` | `open_after`, `cooldown`, `max_retry_after` |
//! | `retry NAME` | `attempts`, `backoff`, `attempt_timeout` |
//! | `bulkhead NAME` | `max_concurrent` |
//! | `shedding` | `deferred at load R`, `background at load R` |
//!
//! Each override replaces the compiled stanza's setting of that key, then the merged policy is
//! validated whole ([`velocity_policy_lang::overrides`]), and each number must stay within its
//! **envelope**: a quarter to four times the compiled value, and for a breaker's `cooldown`
//! and `max_retry_after` a quarter of it up to the compiled value, never above (a set is
//! input, not truth: `deadline = 1ms`, `max_concurrent = 1` or `cooldown = 1000h` would turn
//! the protection against the service). The crate widens an envelope in its compiled policy
//! with an `envelope` stanza (`envelope { operation search deadline within 10% to 400% }`;
//! see [`velocity_policy_lang::overrides`]); an override file cannot. The same envelope holds for the
//! environment's files and the fleet's set. A set that breaks a rule (an `attempt_timeout`
//! above its operation's deadline, a `min_budget` above the deadline, `shed_at` on critical
//! work, zero attempts, a name the compiled policy does not declare, a setting that is not a
//! number) is refused with the diagnostic `policy check` prints for it, at the override's file,
//! line and column: logged as an error event (`kind = "override_refused"`, with `code`, `file`,
//! `line` and `column` fields), listed in the [snapshot](crate::registry::Snapshot::overrides),
//! and the numbers in force stay as they were: the compiled ones at startup, the previous set
//! at a reload. With [`strict`](OverridesBuilder::strict), a refused set at startup is an
//! error instead, and the service does not start. A set with many errors (ten thousand unknown
//! stanzas, say) logs, keeps and renders its first ten, then one event for the rest
//! (`reason = "more_errors"`, with `count`, `codes` and the `first` few named), so a set cannot
//! flood the logs; a set applying more than fifty settings likewise logs one count for the
//! rest (`reason = "more_settings"`).
//!
//! The compiled model comes from the crate's own policy files, read again at startup (the
//! directory the macros read; ship it beside the binary, or point [`Overrides::builder`] at
//! it), rather than from a model the macros would write: the validator then sees the very
//! text `policy check` sees, so its diagnostics are the same, labels and all. Mechanisms an
//! attribute declares inline (not in a file) cannot be overridden; naming one is an unknown
//! name.
//!
//! # How the numbers change under a running service
//!
//! Each mechanism holds its overridable numbers in one cell, read on the hot path with no lock
//! and no allocation (a sequence lock over atomic words; a breaker's rule and tally behind an
//! `arc-swap`), and published whole: a call sees one mechanism's numbers all from before a
//! reload or all from after it. A call reads them where it starts (the operation's deadline
//! and minimum budget when it is admitted, the retry's attempts and timeouts when its first
//! attempt starts), so calls in flight finish on the settings they started with. A breaker
//! keeps its state across a reload of its thresholds (an opening runs to its end, a probation
//! stays, the counters go on; the failures counted toward the rule restart only when the rule
//! itself changes). A bulkhead resized down refuses new callers until the calls in flight drain
//! below the new size, and never takes back a permit.
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_runtime::Registry;
//! use velocity_policy_runtime::overrides::Overrides;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let policies = std::env::temp_dir().join(format!("overrides-doc-{}", std::process::id()));
//! std::fs::create_dir_all(policies.join("production"))?;
//! std::fs::write(
//!     policies.join("search.policy"),
//!     "retry transient { attempts = 3; backoff = full_jitter(base = 50ms, cap = 1s); attempt_timeout = 500ms }\n\
//!      operation search: critical, idempotent { retry = transient; deadline = 2s }\n",
//! )?;
//! std::fs::write(policies.join("production/search.policy"), "operation search { deadline = 800ms }\n")?;
//!
//! let registry: &'static Registry = Box::leak(Box::new(Registry::new()));
//! let overrides = Overrides::builder(&policies)
//!     .environment("production")
//!     .registry(registry)
//!     .strict(true)
//!     .load()?;
//! // What an annotated `search` reads on each call.
//! let search = registry.operation_deadline("shop::search", Duration::from_secs(2), Duration::ZERO);
//! assert_eq!(search.current().0, Duration::from_millis(800));
//!
//! // An unsafe change is refused, with `policy check`'s message; the previous set stays.
//! std::fs::write(policies.join("production/search.policy"), "operation search { deadline = 300ms }\n")?;
//! let refused = overrides.reload().unwrap_err();
//! assert!(refused.to_string().contains("policy::attempt-timeout-exceeds-deadline"));
//! assert_eq!(search.current().0, Duration::from_millis(800));
//! # std::fs::remove_dir_all(&policies)?;
//! # Ok(())
//! # }
//! ```
//!
//! # Reloading
//!
//! [`Overrides::reload`] reads the files again and swaps a valid set in; call it from a signal
//! handler, say SIGHUP with tokio's `signal` feature:
//!
//! ```no_run
//! # async fn serve(overrides: std::sync::Arc<velocity_policy_runtime::overrides::Overrides>) {
//! use tokio::signal::unix::{SignalKind, signal};
//!
//! let mut hangups = signal(SignalKind::hangup()).expect("a SIGHUP handler");
//! tokio::spawn(async move {
//!     while hangups.recv().await.is_some() {
//!         // A refused set is logged and shown on the dashboard; the previous one stays.
//!         let _ = overrides.reload();
//!     }
//! });
//! # }
//! ```
//!
//! [`Overrides::watch`] reloads whenever a file of the
//! compiled or the environment's directory changes (the `notify` crate).
//!
//! # Fleet reload
//!
//! With the feature `redis` as well, one set reaches every instance of a fleet through the
//! [Redis store](crate::redis_store): [`publish`] (from any instance, or a small admin binary)
//! stores the `*.policy` files of a directory, names and texts, as the fleet's set, and
//! announces it on a channel; every instance that [`follow`](Overrides::follow)s validates it
//! against its own compiled policy and applies it through the same path as
//! [`reload`](Overrides::reload), or refuses it with the same diagnostic and error event
//! (`kind = "override_refused"`, `source = "fleet"`), keeping the set in force. The snapshot's
//! [`fleet`](crate::registry::OverridesSnapshot::fleet) says the set came from the fleet (its
//! version, publisher and publication time), and the dashboard shows it.
//!
//! - **The key is the truth, the channel only news.** The set lives under
//!   `<prefix>:overrides:{fleet}` (a hash: `set`, the JSON of the files, its version,
//!   publisher and time; `version`, the same number, which the publishing script compares: a
//!   set is stored only over an older one). A message says only
//!   "read the key"; a follower reads it when it starts following (so an instance started
//!   after a publication starts on the latest set, before its first call), on each
//!   announcement, after each reconnection and at each of the store's re-syncs (5 s by
//!   default), so an announcement missed costs at most one re-sync period. A version already
//!   applied or refused is not applied again. Two publishers at once: the last write to the
//!   key wins, and every instance converges on it.
//! - **Checked as input.** A set over 256 KiB is refused before it crosses the wire (the read
//!   is a script that measures it first, `HSTRLEN`), one not of the one shape before the
//!   validator sees it; with the store's [shared secret](crate::redis_store::RedisStoreBuilder::shared_secret)
//!   a set must be signed with it (sets published by a store with the secret are), its version
//!   and publication time included, so a writer to Redis without the secret cannot change a
//!   number. Without one, whoever can write the key can publish a set, but only one the
//!   validator accepts against each instance's compiled policy, within the envelope.
//! - **Never rolled back.** A follower takes no set older than the one it has: a lower signed
//!   version, or the same version with other contents, is refused as `replayed`; one published
//!   before the set it has, or ahead of its own clock, beyond the store's
//!   [clock tolerance](crate::redis_store::RedisStoreBuilder::clock_tolerance), as `stale`
//!   (each logged once, `kind = "override_refused"`, `source = "fleet"`). A writer can still
//!   put an older genuine set in the key for an instance started afterwards, which has seen
//!   none: it was a set the fleet once ran, checked by the same validator and envelope.
//! - **Never a drill.** The fleet's set may not name a `chaos` stanza
//!   (`policy::not-overridable`): drills are armed and switched on each instance.
//! - **Last one wins.** A reload of the files after a fleet's set puts the files' set in
//!   force again, and the next publication replaces that. The connection, its timeouts and
//!   its outage events are the store's; nothing prints the connection string.
//!
//! ```no_run
//! # async fn fleet(overrides: std::sync::Arc<velocity_policy_runtime::overrides::Overrides>) -> Result<(), Box<dyn std::error::Error>> {
//! use velocity_policy_runtime::redis_store::RedisStore;
//!
//! let store = RedisStore::builder()
//!     .shared_secret(std::env::var("POLICY_REDIS_SECRET")?)
//!     .connect(&std::env::var("REDIS_URL")?)
//!     .await?;
//! // On every instance, at startup: applies the latest set, then each one published.
//! let following = overrides.follow(&store).await;
//!
//! // From one instance or an admin binary, after `policy check --against` passed in CI:
//! let version = velocity_policy_runtime::overrides::publish(&store, "policies/production").await?;
//! # let _ = (following, version);
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use velocity_policy_lang::overrides::{Applied, Origin, Overridden, PolicyFile, overridden_from};
use velocity_policy_lang::{Spec, WorkClass};

use crate::registry::{Registry, Tunings};
use crate::shedding::Thresholds;
use crate::tuning::{FleetOrigin, OverriddenSetting, RefusedOverrides, unix_ms};

/// The environment variable that names the running environment: overrides are read from
/// `<policies>/<POLICY_ENV>/*.policy`. Unset or empty, there are none.
pub const ENV_VAR: &str = "POLICY_ENV";

/// Why a set of overrides was not applied.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OverridesError {
    /// The validator refused the set: `rendered` is what `policy check` prints for it.
    #[error("the overrides in `{dir}` were refused, the numbers in force stay:\n{rendered}")]
    Refused {
        /// The overrides' directory.
        dir: String,
        /// Each error's code (the first ten: the rest are counted in `rendered` and in one
        /// event).
        codes: Vec<String>,
        /// The errors, rendered with file, line, column, snippet and help (the first ten, then
        /// how many more, of which codes, the first few named).
        rendered: String,
    },
    /// A file or directory could not be read.
    #[error("cannot read the policy files in `{dir}`: {source}")]
    Read {
        /// The directory.
        dir: String,
        /// What failed.
        source: std::io::Error,
    },
    /// The fleet's set could not be published or read (feature `redis`).
    #[cfg(feature = "redis")]
    #[error(transparent)]
    Fleet(#[from] crate::redis_store::FleetError),
    /// The watcher could not be started.
    #[error("cannot watch `{dir}` for changes: {source}")]
    Watch {
        /// The directory.
        dir: String,
        /// What failed.
        source: notify::Error,
    },
}

/// Overrides of the compiled policy for the running environment, applied to a registry;
/// [`reload`](Self::reload) applies them again. See the [module](self).
pub struct Overrides {
    registry: &'static Registry,
    compiled_dir: PathBuf,
    dir: Option<PathBuf>,
    environment: Option<String>,
    /// Serialises loads, and holds the names the set in force overrides (a later set that no
    /// longer names one puts its compiled numbers back).
    in_force: Mutex<BTreeSet<(&'static str, String)>>,
}

impl fmt::Debug for Overrides {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Overrides")
            .field("compiled_dir", &self.compiled_dir)
            .field("dir", &self.dir)
            .field("environment", &self.environment)
            .finish()
    }
}

/// Builds [`Overrides`]; see [`Overrides::builder`].
#[derive(Debug)]
#[must_use = "a builder does nothing until `load` is called"]
pub struct OverridesBuilder {
    compiled_dir: PathBuf,
    dir: Option<PathBuf>,
    environment: Option<String>,
    strict: bool,
    registry: &'static Registry,
}

impl OverridesBuilder {
    /// The running environment, instead of [`POLICY_ENV`](ENV_VAR): overrides are read from
    /// `<policies>/<environment>/`.
    pub fn environment(mut self, environment: impl Into<String>) -> Self {
        self.environment = Some(environment.into());
        self
    }

    /// Reads the overrides from `dir` instead of `<policies>/<environment>/`.
    pub fn dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dir = Some(dir.into());
        self
    }

    /// Refuse to start on a refused set: [`load`](Self::load) returns the error instead of
    /// starting on the compiled numbers with an error event. Off by default.
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// The registry to apply them to ([`Registry::global`], which the attribute macros use,
    /// by default).
    pub fn registry(mut self, registry: &'static Registry) -> Self {
        self.registry = registry;
        self
    }

    /// Reads and applies the overrides, before the first call.
    ///
    /// # Errors
    ///
    /// A directory that cannot be read, always; a refused set only when
    /// [`strict`](Self::strict) (otherwise the compiled numbers stay in force, the refusal is
    /// logged and shown in the snapshot).
    pub fn load(self) -> Result<Overrides, OverridesError> {
        let environment = self.environment.or_else(|| {
            std::env::var(ENV_VAR)
                .ok()
                .filter(|environment| !environment.is_empty())
        });
        let dir = self.dir.or_else(|| {
            environment
                .as_ref()
                .map(|environment| self.compiled_dir.join(environment))
        });
        let overrides = Overrides {
            registry: self.registry,
            compiled_dir: self.compiled_dir,
            dir,
            environment,
            in_force: Mutex::new(BTreeSet::new()),
        };
        match overrides.reload() {
            Ok(()) => Ok(overrides),
            Err(refused @ OverridesError::Refused { .. }) if !self.strict => {
                // Logged and listed by `reload`: the service starts on the compiled numbers.
                let _ = refused;
                Ok(overrides)
            }
            Err(error) => Err(error),
        }
    }
}

/// [`Overrides::builder`]`(policies).load()`: the overrides of the environment
/// [`POLICY_ENV`](ENV_VAR) names, from `<policies>/<env>/`, applied to the global registry.
///
/// # Errors
///
/// As [`OverridesBuilder::load`].
pub fn load(policies: impl AsRef<Path>) -> Result<Overrides, OverridesError> {
    Overrides::builder(policies).load()
}

impl Overrides {
    /// Overrides of the compiled policy in `policies` (the crate's policy directory, the one
    /// the attribute macros read), for the environment [`POLICY_ENV`](ENV_VAR) names.
    pub fn builder(policies: impl AsRef<Path>) -> OverridesBuilder {
        OverridesBuilder {
            compiled_dir: policies.as_ref().to_path_buf(),
            dir: None,
            environment: None,
            strict: false,
            registry: Registry::global(),
        }
    }

    /// The running environment, if one is set.
    pub fn environment(&self) -> Option<&str> {
        self.environment.as_deref()
    }

    /// Reads the compiled and the environment's files again; a valid set is swapped in, for
    /// the next call of each mechanism.
    ///
    /// # Errors
    ///
    /// A refused set (the numbers in force stay; the refusal is logged as an error event and
    /// shown in the snapshot), or a directory that cannot be read.
    pub fn reload(&self) -> Result<(), OverridesError> {
        let mut in_force = self.in_force.lock().unwrap_or_else(|p| p.into_inner());
        let files = match &self.dir {
            Some(dir) => read(dir)?,
            None => Vec::new(),
        };
        let dir_text = self
            .dir
            .as_ref()
            .map_or_else(String::new, |dir| dir.display().to_string());
        self.apply(&mut in_force, &files, dir_text, None)
    }

    /// Validates `files` against the compiled policy (read again) and swaps them in, or
    /// refuses them: the one path of a reload and of a fleet's set. `label` names the set in
    /// a refusal; `fleet` says where a fleet's set came from.
    fn apply(
        &self,
        in_force: &mut BTreeSet<(&'static str, String)>,
        files: &[PolicyFile],
        label: String,
        fleet: Option<FleetOrigin>,
    ) -> Result<(), OverridesError> {
        let compiled = read(&self.compiled_dir)?;
        // One validator and one envelope for every set; the fleet's may not touch a drill.
        let origin = if fleet.is_some() {
            Origin::Fleet
        } else {
            Origin::Files
        };
        let merged = overridden_from(&compiled, files, origin);
        let report = merged.check();
        if report.has_errors() {
            return Err(self.refuse(&merged, &report.errors, label, fleet));
        }
        let named = named(&merged.applied);
        // Named before and no longer: back to the compiled numbers, which the merged spec holds.
        let mut touched = named.clone();
        touched.extend(in_force.iter().cloned());
        let tunings = Tunings::from_spec(merged.set.spec(), &touched);
        self.registry.put_tunings(tunings);
        let now = unix_ms();
        let settings = settings(&merged);
        let source = if fleet.is_some() { "fleet" } else { "files" };
        for setting in settings.iter().take(SHOWN_SETTINGS) {
            tracing::info!(
                target: "policy",
                kind = "override_applied",
                source,
                mechanism = &*setting.kind,
                name = setting.name.as_deref().unwrap_or(""),
                setting = &*setting.setting,
                value = &*setting.value,
                file = &*setting.file,
                line = setting.line,
                column = setting.column,
                "override applied: {} {} {} = {}",
                setting.kind,
                setting.name.as_deref().unwrap_or(""),
                setting.setting,
                setting.value
            );
        }
        if let Some(count) = settings
            .len()
            .checked_sub(SHOWN_SETTINGS)
            .filter(|n| *n > 0)
        {
            tracing::info!(
                target: "policy",
                kind = "override_applied",
                source,
                reason = "more_settings",
                count,
                "and {count} more settings applied in the same set"
            );
        }
        self.registry.set_overrides_snapshot(|snapshot| {
            snapshot.environment = self.environment.as_deref().map(Arc::from);
            snapshot.dir = self
                .dir
                .as_ref()
                .map(|dir| Arc::from(dir.display().to_string()));
            snapshot.applied += 1;
            snapshot.applied_at_unix_ms = Some(now);
            snapshot.settings = settings;
            snapshot.refused = None;
            snapshot.fleet = fleet;
        });
        *in_force = named;
        Ok(())
    }

    /// Logs and records a refused set, and returns its error.
    fn refuse(
        &self,
        merged: &Overridden,
        errors: &[velocity_policy_lang::Diagnostic],
        dir: String,
        fleet: Option<FleetOrigin>,
    ) -> OverridesError {
        let source = if fleet.is_some() { "fleet" } else { "files" };
        // A set of ten thousand bad stanzas is one mistake repeated, not ten thousand events:
        // the first few are logged and kept each, the rest counted in one event.
        let (shown, more) = errors.split_at(errors.len().min(SHOWN_REFUSALS));
        let codes: Vec<String> = shown.iter().map(|error| error.code()).collect();
        let mut rendered = shown
            .iter()
            .map(|error| merged.set.render(error))
            .collect::<Vec<_>>()
            .join("\n");
        for error in shown {
            let position = error
                .primary_loc()
                .and_then(|loc| merged.set.sources().position(loc));
            tracing::error!(
                target: "policy",
                kind = "override_refused",
                source,
                code = error.code(),
                file = position.as_ref().map_or("", |p| p.file),
                line = position.as_ref().map_or(0, |p| p.line),
                column = position.as_ref().map_or(0, |p| p.column),
                "{}",
                merged.set.render(error)
            );
        }
        if !more.is_empty() {
            let mut kinds: Vec<String> = more.iter().map(|error| error.code()).collect();
            kinds.sort();
            kinds.dedup();
            let first: Vec<String> = more
                .iter()
                .take(SHOWN_NAMES)
                .map(|error| match &error.kind {
                    velocity_policy_lang::Kind::UnknownName { name, .. } => format!("`{name}`"),
                    _ => error
                        .primary_loc()
                        .and_then(|loc| merged.set.sources().position(loc))
                        .map_or_else(
                            || error.code(),
                            |p| format!("{}:{}:{}", p.file, p.line, p.column),
                        ),
                })
                .collect();
            let (count, codes_text, first_text) = (more.len(), kinds.join(", "), first.join(", "));
            tracing::error!(
                target: "policy",
                kind = "override_refused",
                source,
                reason = "more_errors",
                count,
                codes = codes_text.as_str(),
                first = first_text.as_str(),
                "and {count} more errors in the same set ({codes_text}), the first at {first_text}"
            );
            rendered.push_str(&format!(
                "\n... and {count} more errors ({codes_text}), the first at {first_text}"
            ));
        }
        let refused = RefusedOverrides {
            at_unix_ms: unix_ms(),
            codes: codes.iter().map(|code| Arc::from(code.as_str())).collect(),
            rendered: Arc::from(rendered.as_str()),
            fleet,
        };
        self.registry.set_overrides_snapshot(|snapshot| {
            snapshot.environment = self.environment.as_deref().map(Arc::from);
            snapshot.dir = self
                .dir
                .as_ref()
                .map(|dir| Arc::from(dir.display().to_string()));
            snapshot.refusals += 1;
            snapshot.refused = Some(refused);
        });
        OverridesError::Refused {
            dir,
            codes,
            rendered,
        }
    }
}

/// How many errors of one refused set are logged, kept in the snapshot and rendered each; the
/// rest are counted in one event.
const SHOWN_REFUSALS: usize = 10;
/// How many of the rest are named in that event.
const SHOWN_NAMES: usize = 5;
/// How many settings of one applied set are logged each; the rest are counted in one event.
const SHOWN_SETTINGS: usize = 50;

/// Every `*.policy` file of `dir`.
fn read(dir: &Path) -> Result<Vec<PolicyFile>, OverridesError> {
    PolicyFile::read_dir(dir).map_err(|source| OverridesError::Read {
        dir: dir.display().to_string(),
        source,
    })
}

/// The mechanisms a set names, by kind and name (an operation's also tunes its shedder).
fn named(applied: &[Applied]) -> BTreeSet<(&'static str, String)> {
    applied
        .iter()
        .filter_map(|applied| {
            let kind = match applied.keyword.as_str() {
                "operation" => "operation",
                "breaker" => "breaker",
                "retry" => "retry",
                "bulkhead" => "bulkhead",
                "shedding" => "shedding",
                "chaos" => "chaos",
                _ => return None,
            };
            Some((kind, applied.name.clone().unwrap_or_default()))
        })
        .collect()
}

/// What the snapshot lists of a set.
fn settings(merged: &Overridden) -> Vec<OverriddenSetting> {
    merged
        .applied
        .iter()
        .map(|applied| {
            let position = merged.set.sources().position(applied.loc);
            OverriddenSetting {
                kind: Arc::from(applied.keyword.as_str()),
                name: applied.name.as_deref().map(Arc::from),
                setting: Arc::from(applied.key.as_str()),
                value: Arc::from(applied.value.as_str()),
                compiled: applied.replaced.as_deref().map(Arc::from),
                file: Arc::from(position.as_ref().map_or("", |p| p.file)),
                line: position.as_ref().map_or(0, |p| saturating_u32(p.line)),
                column: position.as_ref().map_or(0, |p| saturating_u32(p.column)),
            }
        })
        .collect()
}

fn saturating_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

// How a merged set becomes the registry's `Tunings`: the numbers of each mechanism it touches.
// (The registry keeps them and applies them.)
impl Tunings {
    /// The numbers of the merged `spec` for every mechanism of `touched`.
    fn from_spec(spec: &Spec, touched: &BTreeSet<(&'static str, String)>) -> Self {
        let mut tunings = Self::default();
        let shedding_touched = touched.iter().any(|(kind, _)| *kind == "shedding");
        let (deferred, background) = spec.shedding_thresholds();
        for breaker in &spec.breakers {
            if !touched.contains(&("breaker", breaker.name.value.clone())) {
                continue;
            }
            tunings
                .breakers
                .insert(breaker.name.value.clone(), breaker.config);
        }
        for retry in &spec.retries {
            if !touched.contains(&("retry", retry.name.value.clone())) {
                continue;
            }
            tunings
                .retries
                .insert(retry.name.value.clone(), retry.config);
        }
        for bulkhead in &spec.bulkheads {
            if touched.contains(&("bulkhead", bulkhead.name.value.clone())) {
                tunings
                    .bulkheads
                    .insert(bulkhead.name.value.clone(), bulkhead.config);
            }
        }
        for operation in &spec.operations {
            let name = &operation.name.value;
            if !shedding_touched && !touched.contains(&("operation", name.clone())) {
                continue;
            }
            tunings
                .operations
                .insert(name.clone(), spec.deadline_config(operation));
            let shed_at = operation.shed_at.as_ref().map(|shed_at| shed_at.value);
            let thresholds = match (operation.class.value, shed_at) {
                (WorkClass::Deferred, Some(shed_at)) => Thresholds {
                    deferred: shed_at,
                    background,
                },
                (WorkClass::Background, Some(shed_at)) => Thresholds {
                    deferred,
                    background: shed_at,
                },
                _ => Thresholds {
                    deferred,
                    background,
                },
            };
            tunings.shedders.insert(name.clone(), thresholds);
        }
        #[cfg(feature = "chaos")]
        for chaos in &spec.chaos {
            if touched.contains(&("chaos", chaos.name.value.clone())) {
                tunings
                    .chaos
                    .insert(chaos.name.value.clone(), chaos_settings(chaos));
            }
        }
        tunings
    }
}

mod watch {
    use std::sync::Arc;

    use notify::{RecursiveMode, Watcher as _};

    use super::{Overrides, OverridesError};

    /// How long the files must be quiet before a change is read.
    const QUIET: std::time::Duration = std::time::Duration::from_millis(50);

    /// Reloads the overrides whenever a file of the compiled or the environment's directory
    /// changes; dropping it stops watching.
    pub struct Watcher {
        _watcher: notify::RecommendedWatcher,
    }

    impl std::fmt::Debug for Watcher {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Watcher")
        }
    }

    impl Overrides {
        /// Watches the policy directories and [reloads](Self::reload) on each change (a
        /// refused set is logged and listed, the previous one stays).
        ///
        /// # Errors
        ///
        /// The watcher could not be started, or a directory could not be watched.
        pub fn watch(self: &Arc<Self>) -> Result<Watcher, OverridesError> {
            let (changed, changes) = std::sync::mpsc::channel::<()>();
            let mut watcher =
                notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                    if event.is_ok_and(|event| !event.kind.is_access()) {
                        let _ = changed.send(());
                    }
                })
                .map_err(|source| OverridesError::Watch {
                    dir: self.compiled_dir.display().to_string(),
                    source,
                })?;
            // One reload per burst of events: an editor's save (truncate, write, rename) is
            // read once it is quiet for QUIET, not half-written. The thread ends with the
            // watcher, which holds the sending side.
            let overrides = Arc::downgrade(self);
            std::thread::Builder::new()
                .name("policy-overrides-watch".into())
                .spawn(move || {
                    while changes.recv().is_ok() {
                        while changes.recv_timeout(QUIET).is_ok() {}
                        let Some(overrides) = overrides.upgrade() else {
                            return;
                        };
                        // Logged and listed when refused; the set in force stays.
                        let _ = overrides.reload();
                    }
                })
                .map_err(|source| OverridesError::Read {
                    dir: self.compiled_dir.display().to_string(),
                    source,
                })?;
            for dir in std::iter::once(&self.compiled_dir).chain(self.dir.as_ref()) {
                if dir.is_dir() {
                    watcher
                        .watch(dir, RecursiveMode::NonRecursive)
                        .map_err(|source| OverridesError::Watch {
                            dir: dir.display().to_string(),
                            source,
                        })?;
                }
            }
            Ok(Watcher { _watcher: watcher })
        }
    }
}

pub use watch::Watcher;

#[cfg(feature = "redis")]
mod fleet {
    use std::path::Path;
    use std::sync::Arc;

    use velocity_policy_lang::overrides::PolicyFile;

    use super::{Overrides, OverridesError, read};
    use crate::redis_store::{FleetError, FleetOverrides, FleetPolicyFile, RedisStore};
    use crate::tuning::FleetOrigin;

    /// Publishes the `*.policy` files of `dir` as the fleet's override set through `store`
    /// (features `redis` and `overrides`): every instance [following](Overrides::follow) the
    /// fleet validates it against its own compiled policy, and applies it or refuses it as a
    /// reload would. Returns the set's version. Check the set first in CI with
    /// `policy check --against`: each instance refuses a bad set, none is stopped by it.
    ///
    /// # Errors
    ///
    /// `dir` cannot be read, a file is not UTF-8, or the store could not publish
    /// ([`FleetError`]).
    pub async fn publish(store: &RedisStore, dir: impl AsRef<Path>) -> Result<u64, OverridesError> {
        let files = read(dir.as_ref())?
            .into_iter()
            .map(|file| match String::from_utf8(file.bytes) {
                Ok(text) => Ok(FleetPolicyFile {
                    name: file.name,
                    text,
                }),
                Err(_) => Err(FleetError::NotText(file.name)),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(store.publish_overrides(files).await?)
    }

    /// Follows the fleet's override sets ([`Overrides::follow`]), holding the overrides and
    /// the store; dropping it stops.
    #[derive(Debug)]
    #[must_use = "dropping it stops following the fleet's overrides"]
    pub struct Following {
        task: tokio::task::JoinHandle<()>,
    }

    impl Drop for Following {
        fn drop(&mut self) {
            self.task.abort();
        }
    }

    /// What a follower has seen of the key.
    #[derive(Default)]
    struct Seen {
        /// The set last applied or refused: not applied again, and no set older than it is
        /// taken (a replay of an older signed set, or one published before it).
        last: Option<FleetOverrides>,
        /// The reason the last read was not accepted, logged once until it changes.
        rejected: Option<&'static str>,
    }

    impl Overrides {
        /// Applies the fleet's override set published through `store`
        /// ([`publish`]), now and whenever another is published: reads the
        /// latest set stored in Redis before returning (so the first call already uses it),
        /// then again on each announcement, on each reconnection and at each of the store's
        /// re-syncs (so an announcement missed costs at most one re-sync period). Each set is
        /// validated and applied, or refused with `policy check`'s diagnostic (the set in
        /// force stays), exactly as [`reload`](Self::reload) does with files; whichever
        /// came last, a reload of the files or a fleet's set, is in force. Must run inside a
        /// tokio runtime.
        pub async fn follow(self: &Arc<Self>, store: &RedisStore) -> Following {
            let mut news = store.overrides_news();
            news.mark_unchanged();
            let mut seen = Seen::default();
            self.catch_up(store, &mut seen).await;
            // Held by the task, which ends when the `Following` is dropped.
            let overrides = Arc::clone(self);
            let store = store.clone();
            let task = tokio::spawn(async move {
                while news.changed().await.is_ok() {
                    overrides.catch_up(&store, &mut seen).await;
                }
            });
            Following { task }
        }

        /// Validates the fleet's `set` and applies it, or refuses it (logged, listed in the
        /// snapshot, the set in force stays), through the same path as a reload.
        ///
        /// # Errors
        ///
        /// A refused set, or a compiled directory that cannot be read.
        pub fn apply_fleet(&self, set: &FleetOverrides) -> Result<(), OverridesError> {
            let mut in_force = self.in_force.lock().unwrap_or_else(|p| p.into_inner());
            let files: Vec<PolicyFile> = set
                .files
                .iter()
                .map(|file| PolicyFile::new(file.name.clone(), file.text.clone()))
                .collect();
            let origin = FleetOrigin {
                version: set.version,
                publisher: Arc::from(set.publisher.as_str()),
                published_at_unix_ms: set.published_at_unix_ms,
            };
            self.apply(&mut in_force, &files, set.to_string(), Some(origin))
        }

        async fn catch_up(&self, store: &RedisStore, seen: &mut Seen) {
            let read = store.latest_overrides().await.and_then(|set| match set {
                Some(set) if seen.last.as_ref() == Some(&set) => Ok(None),
                Some(set) => store
                    .check_succession(&set, seen.last.as_ref(), crate::tuning::unix_ms())
                    .map(|()| Some(set)),
                None => Ok(None),
            });
            match read {
                Ok(Some(set)) => {
                    seen.rejected = None;
                    // Logged and listed when refused; the set in force stays.
                    let _ = self.apply_fleet(&set);
                    seen.last = Some(set);
                }
                Ok(None) => seen.rejected = None,
                // The store logs its outage once; the next news reads again.
                Err(FleetError::Unavailable(_)) => {}
                Err(error) => {
                    let reason = match &error {
                        FleetError::Rejected(reason) => *reason,
                        _ => "error",
                    };
                    if seen.rejected.replace(reason) != Some(reason) {
                        tracing::error!(
                            target: "policy",
                            kind = "override_refused",
                            source = "fleet",
                            code = reason,
                            instance = store.instance(),
                            "{error}"
                        );
                    }
                }
            }
        }
    }
}

#[cfg(feature = "redis")]
pub use fleet::{Following, publish};

/// The runtime's settings of a `chaos` stanza.
#[cfg(feature = "chaos")]
fn chaos_settings(spec: &velocity_policy_lang::ChaosSpec) -> crate::chaos::ChaosSettings {
    use crate::chaos::{ChaosSettings, Fault, Latency};
    use velocity_policy_lang::{ChaosFaultKind, ChaosLatency};
    let mut settings = ChaosSettings::NONE;
    for fault in &spec.faults {
        let runtime = match fault.kind {
            ChaosFaultKind::Latency(ChaosLatency::Fixed(delay)) => {
                Fault::Latency(Latency::Fixed { delay })
            }
            ChaosFaultKind::Latency(ChaosLatency::Uniform { min, max }) => {
                Fault::Latency(Latency::Uniform { min, max })
            }
            ChaosFaultKind::Latency(ChaosLatency::LogNormal { p50, p99 }) => {
                Fault::Latency(Latency::LogNormal { p50, p99 })
            }
            ChaosFaultKind::Error => Fault::Error,
            ChaosFaultKind::Refuse => Fault::Refuse,
            ChaosFaultKind::TooManyRequests { retry_after } => {
                Fault::TooManyRequests { retry_after }
            }
            _ => continue,
        };
        settings = settings.fault(runtime, fault.rate.value);
    }
    settings.during = spec.during.as_ref().map(|d| d.value);
    settings.instances = spec.instances.as_ref().map(|s| s.value);
    settings.enabled = spec.enabled.as_ref().is_none_or(|on| on.value);
    settings
}
