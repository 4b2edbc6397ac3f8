//! The `.policy` language: text → syntax tree → [`Spec`] → one validator, with diagnostics.
//!
//! Attributes and `.policy` files are two spellings of one model: both are lowered to the same
//! [`Spec`] and checked by the one validator that lives here ([`validate()`]). This crate has no
//! async code and light dependencies, because the attribute macros use it at compile time.
//!
//! ```
//! use velocity_policy_lang::PolicySet;
//!
//! let mut policies = PolicySet::new();
//! policies.add_source(
//!     "service.policy",
//!     br#"
//! request { deadline = 10s }
//! retry transient { attempts = 3; backoff = full_jitter(base = 50ms, cap = 1s); attempt_timeout = 2s }
//! operation index_document: deferred { retry = transient; deadline = 5s }
//! "#,
//! );
//! let report = policies.check();
//! let codes: Vec<String> = report.errors.iter().map(|error| error.code()).collect();
//! assert_eq!(codes, ["policy::deferred-not-idempotent", "policy::retry-not-idempotent"]);
//!
//! // A fixed, colourless rendering with the file, line, column and snippet.
//! let rendered = policies.render(&report.errors[1]);
//! assert!(rendered.contains("service.policy:4:46"));
//! ```
//!
//! # The language
//!
//! ```text
//! // Comments run to the end of the line.
//! request { deadline = 10s }
//!
//! breaker payments { open_after = 5 failures within 30s; cooldown = 20s; shared }
//! breaker search { open_after = 50% of at least 20 calls within 1m; cooldown = 10s; shared(quorum = 2) }
//! breaker ai { open_after = 3 failures within 10s; cooldown = 1m; max_retry_after = 2m }
//! bulkhead payments { max_concurrent = 4; max_queued = 8 }
//! retry transient {
//!     attempts = 3                                  // the first attempt included
//!     backoff = full_jitter(base = 50ms, cap = 1s)
//!     attempt_timeout = 2s
//!     allowance = 20% + 10/s                        // retries may add 20% of calls, 10/s at least
//! }
//! shedding { deferred at load 0.5; background at load 0.25 }
//! ratelimit signups { 100 per 1m; on_timeout = open; on_error = closed }
//! ratelimit logins { 10 per 1m; on_timeout = local; on_error = local; local_rate = 5 per 1m }
//! queue embeddings { max_len = 10000; visibility_timeout = 30s; max_deliveries = 5 }
//!
//! operation charge_card: critical, durable {
//!     breaker = payments
//!     bulkhead = payments
//!     deadline = 3s
//!     min_budget = 200ms
//! }
//! operation index_document: deferred, idempotent { retry = transient; deadline = 5s }
//! operation feed: critical { fallback = "cached_feed"; fallback_on_failure; poll_budget = 10ms }
//! operation resize_image: critical { isolate = rayon(max_concurrent = 2, max_queued = 4) }
//! operation embed_document: background, idempotent { queue = embeddings; deadline = 20s }
//!
//! // What the built front end may ship (`policy assets`); every setting has a default.
//! assets web { dir = "web/dist"; max_image = 200kb; large_image = 50kb; max_high_priority = 1 }
//! locality {
//!     database = blocking env DATABASE_URL          // session lookup on every request
//!     cache = blocking env UPSTASH_REDIS_REST_URL
//!     assets = async env R2_URL                     // fetched by the browser
//! }
//! ```
//!
//! Every stanza is `KEYWORD [NAME] [: class, flags] { statements }`, its header on one line with
//! the `{`. Statements are `key = value` or a phrase, separated by `;` or new lines. Durations
//! take `ms`, `s`, `m`, `h`; sizes `b`, `kb`, `mb`, `gb`; ratios are `0.25` or `25%`.
//!
//! | stanza | settings |
//! |---|---|
//! | `request` | `deadline`; optional `min_budget` (the least budget a request is started with: one arriving with less left is answered at once, before any work) |
//! | `breaker NAME` | `open_after = N failures within D` or `= P% of at least N calls within D`; `cooldown`; optional `shared`, `shared(quorum = N)` or `shared(trips_only)` (default: not shared); optional `max_retry_after` (the longest opening a `Retry-After` may ask for; default 5m); optional `probation` (how long after an opening one failure reopens it; default one window) |
//! | `bulkhead NAME` | `max_concurrent` (≥ 1), or `adaptive(min = N, max = N)` (the slot count follows the dependency's latency between the two, from `min`; Netflix's Vegas, adapted), `max_queued` (default 0) |
//! | `retry NAME` | `attempts` (the first included), `backoff = full_jitter(base = D, cap = D)`, optional `attempt_timeout`, optional `allowance = P% + N/s` (the share of recent calls its retries may add, across requests, and a floor per second) |
//! | `hedge NAME` | `after = pN` (the operation's own latency at percentile N, 1 to 99, as the runtime records it) or `after = D` (fixed); optional `max` (attempts in flight, the first included: 2, the default, is one hedge; at most 3); optional `min_delay` (the shortest a hedge waits, whatever the percentile says: a floor under a p95 that fast calls pulled down to where nearly every call would be hedged; default none); optional `allowance = P% + N/s` (what its hedges may add when the operation does not retry; with a retry, hedges draw from the retry's allowance) |
//! | `shedding` | `deferred at load R`, `background at load R` (defaults 0.5 and 0.25) |
//! | `ratelimit NAME` | `N per D` (on each instance, or across the fleet with a limiter store); for the fleet's store, `on_timeout = open\|closed\|local` and `on_error = open\|closed\|local` (`local`, the default: this instance enforces a rate of its own while the store fails; a limiter guarding critical work must choose both), optional `local_rate = N per D` (default: the fleet's rate) |
//! | `queue NAME` | all optional, each the runtime's default when absent: `max_len` (unfinished tasks the Redis stream may hold, ≥ 1, default 10000; an enqueue past it is refused), `visibility_timeout` (how long a delivered task may stay unacknowledged before another worker claims it, default 30s), `max_deliveries` (after which an unfinished task is dead-lettered, ≥ 1, default 5), `task_deadline` (the bound on one delivery, at most four fifths of the visibility timeout, default 10s), `concurrency` (tasks one instance's worker runs at once, ≥ 1, default 4). Declaring a queue is optional: an operation's `queue = NAME` with no stanza runs with the defaults. The attribute's expansion hands the numbers to the runtime as `fn_name::queue_settings()` |
//! | `operation NAME: CLASS[, idempotent][, durable]` | `breaker`, `bulkhead`, `retry`, `hedge` (idempotent only), `ratelimit` (names), `deadline`, `min_budget`, `expected_cost`, `stale_if_error`, `poll_budget` (durations), `shed_at` (a load, deferred and background only), `fallback` (a string), `fallback_on_failure` (the fallback also answers the work's own failures), `isolate = blocking\|rayon[(max_concurrent = N, max_queued = N)]` (CPU work on a pool of its own; nothing else may be set), `queue` (a name: background work enqueued on the durable queue the application installs under it) |
//! | `assets NAME` | all optional: `dir` (a string, relative to the policy file), `max_image` (default `200kb`), `large_image` (`50kb`; no longer used by `policy assets`, kept so policies still parse), `max_font` (`100kb`), and per document `max_font_files` (4), `max_font_weights` (3 per family), `max_high_priority` (2 `fetchpriority="high"`), `max_preloads` (3); see [`AssetsSpec`] |
//! | `locality` | one hop per line, `NAME = blocking env VARIABLE` or `NAME = async env VARIABLE`: a call the request waits for or not, and the variable whose connection string locates the service (the region is derived from it by `policy locality`, never written here) |
//! | `ceilings NAME` | `dir` (a front-end build folder, for the front-end metrics); one ceiling a line, `METRIC [gzip] at most CEILING measured VALUE headroom P%` (below) |
//! | `quarantine CRATE` | optional `crate` (the crate, when the stanza's name is only a label, so one crate can be quarantined for several packages), `package` (whose default build must not contain the crate), `behind` (the feature of `package` it stays behind), optional `only` (the crates allowed to depend on it directly: `only = "a" "b"`), optional `justification` (allows it in the default build, and is printed) |
//! | `envelope` | one line per widened envelope, `KIND [NAME] [SETTING] within LOW% to HIGH%` (`operation search deadline within 10% to 400%`): how far a run-time override may move the compiled numbers of that stanza, or that setting, instead of the default (a quarter to four times the compiled value; `cooldown` and `max_retry_after` never above it). Only the compiled policy may say it; see [`overrides`] |
//!
//! `ceilings` and `quarantine` are read by `policy gate`. A ceiling's metric is a front-end
//! metric (`baseline_js_kb`, `route_js_kb`, `median_route_js_kb`, `total_client_js_kb`,
//! `doc_html_kb`, each stored or `gzip`), `binary "PATH"`, `binary_code "PATH"`,
//! `crates "PACKAGE"` (a count, no unit) or `files "GLOB"` (stored or `gzip`). Sizes are powers
//! of 1024 (`1kb` is 1024 bytes). `measured` is the value the ceiling was last set from, and
//! `headroom` the growth it allows: `policy gate --ratchet` lowers the ceiling toward
//! `measured × (1 + headroom)`, never raises it.
//!
//! One word, one meaning: a **budget** is time, what is left of a deadline (`min_budget`, the
//! least worth starting with; a refusal for too little of it); an **allowance** is the share of
//! traffic retries may add (`allowance = 20% + 10/s`); a **ceiling** is the most a build may
//! weigh (`ceilings NAME`). Writing `budget` for either of the others is an error whose help
//! names the word to use.
//!
//! # Diagnostics
//!
//! Every diagnostic has a stable code. Errors make a policy invalid; warnings do not.
//!
//! Codes follow one scheme: `velocity_policy::RULE` for what the language finds in the text alone (the
//! table below), `velocity_policy::COMMAND::RULE` for what a command of the `policy` tool finds with
//! more than the text (`policy::gate::over-ceiling` needs a build), the rule in kebab case. Both
//! are drawn by one adapter, [`diagnostic::Renderable`], from any rule that is a
//! `miette::Diagnostic` and its [`Label`]s on policy text.
//!
//! What values a mechanism's optional number accepts (a hedge's `max`, a retry's
//! `attempt_timeout`) is its row's [`Range`] in the model, with the code and the help it is
//! refused with; the one validator reads it, for the files, the attributes and the overrides.
//!
//! | code | what it means | the fix |
//! |---|---|---|
//! | `policy::invalid-utf8` | the file is not UTF-8 | save it as UTF-8 |
//! | `policy::too-large` | the file is over [`MAX_SOURCE_LEN`] bytes | split it across files |
//! | `policy::syntax` | the text does not follow the grammar | as the help says; every bad statement and stanza is reported |
//! | `policy::unknown-stanza` | a stanza keyword that does not exist | the suggested keyword (for `budget`: `ceilings`) |
//! | `policy::missing-name` | `breaker { ... }` without a name | `breaker NAME { ... }` |
//! | `policy::unexpected-name` | `request x { ... }` | drop the name |
//! | `policy::unexpected-tags` | `: critical` on a stanza other than `operation` | drop the tags |
//! | `policy::unknown-setting` | a key the stanza does not have | the suggested key (for `budget` in a `retry`: `allowance`) |
//! | `policy::duplicate-setting` | a key set twice in one stanza | keep one |
//! | `policy::missing-setting` | a required key is absent | add it (the help shows an example) |
//! | `policy::invalid-value` | a value of the wrong kind (`30` for a duration, `maybe` for `open`) | write it as the help shows |
//! | `policy::missing-class` | an operation without `critical`, `deferred` or `background` | add one |
//! | `policy::conflicting-classes` | an operation with two classes | keep one |
//! | `policy::unknown-flag` | a tag that is neither a class nor a flag | the suggested flag |
//! | `policy::duplicate-name` | two items of one kind with one name (across files too) | rename or remove one |
//! | `policy::duplicate-stanza` | two `request` or `shedding` stanzas | merge them |
//! | `policy::unknown-metric` | a ceiling whose metric does not exist | the suggested metric |
//! | `policy::unknown-name` | an operation names a breaker, bulkhead, retry, hedge, rate limit or chaos that does not exist | the suggested name, or define it |
//! | `policy::retry-not-idempotent` | retry on an operation not marked `idempotent` | mark it, or remove the retry |
//! | `policy::hedge-not-idempotent` | a hedge on an operation not marked `idempotent` (a hedge runs the work twice at once) | mark it, or remove the hedge |
//! | `policy::hedge-max-out-of-range` | a hedge's `max` (attempts in flight, the first included) outside 2 to 3 | `max = 2`, one hedge |
//! | `policy::chaos-rate-out-of-range` | a chaos fault's rate, or its `instances`, outside 0 to 100% | a share such as `5%` |
//! | `policy::chaos-empty` | a `chaos` stanza with no fault | add one: `error at 5%` |
//! | `policy::chaos-range-reversed` | a chaos `during` window, `uniform` range or `lognormal` p50/p99 with the larger first | write the smaller first |
//! | `policy::deferred-not-idempotent` | deferred or background work not marked `idempotent` (it is delivered at least once) | make it idempotent, or critical |
//! | `policy::durable-not-critical` | a `durable` write that is deferred or background | make it critical |
//! | `policy::retry-without-deadline` | a retry with no deadline on the operation or the request | add one |
//! | `policy::min-budget-exceeds-deadline` | `min_budget` above the effective deadline | lower it, or raise the deadline |
//! | `policy::attempt-timeout-exceeds-deadline` | a retry's `attempt_timeout` above the effective deadline of an operation that uses it | lower it, or raise the deadline |
//! | `policy::request-min-budget-exceeds-deadline` | the `request` stanza's `min_budget` above its deadline (every request would be refused) | lower it, or raise the deadline |
//! | `policy::duration-not-positive` | a zero or negative duration | a positive duration |
//! | `policy::zero-attempts` | `attempts = 0` | at least 1 |
//! | `policy::zero-count` | zero slots (an adaptive `min` included), failures, calls, quorum or rate | at least 1 |
//! | `policy::ratio-out-of-range` | a failure ratio, retry allowance or ceiling headroom outside (0, 100%] | a share such as `50%` |
//! | `policy::shedding-threshold-out-of-range` | a shedding threshold outside (0, 1) | a load such as `0.5` |
//! | `policy::fallback-on-scheduled` | `fallback` or `stale_if_error` on deferred or background work, which answers nobody | remove it: the work's failures are logged |
//! | `policy::isolate-stands-alone` | an isolated operation that also sets a mechanism, a deadline or a fallback, or is not critical | move them to the operation that calls it |
//! | `policy::queue-not-background` | `queue` on an operation that is not background work | make it `background`, or remove `queue` |
//! | `policy::task-deadline-exceeds-visibility` | a `queue` stanza's `task_deadline` longer than four fifths of its visibility timeout (declared, or the default 30s): a task still running when another worker may claim it would run twice at once, and the worker lowers the deadline | lower `task_deadline`, or raise `visibility_timeout` |
//! | `policy::ratelimit-fail-mode-unset` | a rate limit guarding critical work without `on_timeout` or `on_error` (they default to `local`) | choose both: `closed`, `open` or `local` |
//! | `policy::adaptive-with-fixed-limit` | a bulkhead with both `max_concurrent` and `adaptive(...)` | remove one: `max_concurrent` for a fixed count, `adaptive` for one that follows latency |
//! | `policy::adaptive-bounds-inverted` | `adaptive(min = N, max = M)` with `min` above `max` | `min` at most `max` |
//! | `policy::shed-critical` | `shed_at` on a critical operation: critical work is never shed for load | remove it, or make the work deferred or background |
//! | `policy::shedding-thresholds-inverted` | background shed later than deferred | background at or below deferred |
//! | `policy::backoff-base-above-cap` | `full_jitter` base above its cap | base at most cap |
//! | `policy::zero-size` | an `assets` size ceiling of zero bytes | a positive size, or `max_font_files = 0` to forbid web fonts |
//! | `policy::empty-locality` | a `locality` stanza with no hop | declare the hops, or remove it |
//! | `policy::unknown-hop-kind` | a hop that is neither `blocking` nor `async` | the suggested kind |
//! | `policy::duplicate-variable` | two hops located by one variable | declare the service once, or name the other variable |
//! | `policy::deadline-clamped` (warning) | an operation deadline longer than the request's: it will be clamped | lower it |
//! | `policy::unreachable-attempts` (warning) | attempts that cannot start in the deadline once earlier ones time out | fewer attempts or shorter timeouts |
//! | `policy::undeclared-queue` (warning) | an operation's `queue` names no `queue` stanza but one with a close name exists (an undeclared queue runs with the runtime's defaults) | the suggested name |
//! | `policy::queue-stores-backlog` (warning) | `max_queued` above [`validate::BACKLOG_FACTOR`] × `max_concurrent` | a shorter queue |
//! | `policy::large-image-above-max` (warning) | `large_image` at or above `max_image`: the large-image rules only repeat the ceiling | `large_image` below `max_image` |
//!
//! ## Checked against the code
//!
//! `policy explain` composes each entry point's tree of operations from the code and the policy
//! ([`bound`]), and reports what the tree shows with the codes `policy::explain::...`
//! (`child-never-fits`, `attempts-exceed-deadline`, `no-min-budget`, `no-request-deadline`,
//! `call-cycle`): warnings, listed in the [`bound`] module with their fixes.
//!
//! ## Checked against an environment
//!
//! `policy locality --check` compares each declared hop with the regions the locality probe
//! derives from an environment, and reports with these codes (no file alone can raise them, so
//! the corpus does not either: the `policy` command's tests do).
//!
//! | code | what it means | the fix |
//! |---|---|---|
//! | `policy::cross-region-hop` | a blocking hop to a service in another region than the compute | move one of them, or make the hop `async` |
//! | `policy::hop-not-located` | a hop's variable is not set, or holds no connection string | set it, or name the right variable |
//! | `policy::unknown-region` (warning) | the compute's or a blocking hop's region cannot be derived: `region: null` is an answer, and the reason says why | find out where it runs |
//!
//! # For the attribute macros
//!
//! Load the policy files of a directory with [`PolicySet::load_dir`], add what the attributes
//! say with [`PolicySet::add_operation`] (and `add_breaker`, `add_retry`, ... for inline
//! definitions), giving their nodes [`Loc::External`] locations, then call
//! [`PolicySet::check`]: the same validator runs, and each [`Diagnostic`]'s labels carry either
//! a file location ([`PolicySet::render`] gives `file:line:col` and the snippet) or the external
//! token to map back to a span.
//!
//! # Feature flags
//!
#![doc = include_str!("features.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]

// pest is built without `std` (see the workspace's Cargo.toml), so the parser it generates
// names `crate::alloc`.
extern crate alloc;

// The tree keeps what only the formatter and the overrides read (comments, exact locations),
// and the parser's items are public for `fmt`: without `tools`, parts of both go unused.
#[cfg_attr(
    not(feature = "tools"),
    allow(
        dead_code,
        unreachable_pub,
        reason = "read by `fmt` and `overrides`, which are `tools`'"
    )
)]
mod ast;
#[cfg(feature = "tools")]
pub mod bound;
pub mod diagnostic;
#[cfg(feature = "tools")]
pub mod explain;
#[cfg(feature = "files")]
pub mod files;
#[cfg(feature = "tools")]
pub mod fmt;
mod lower;
#[cfg(feature = "tools")]
pub mod overrides;
#[cfg_attr(
    not(feature = "tools"),
    allow(unreachable_pub, reason = "public for `fmt`, which is `tools`'")
)]
mod parse;
pub mod source;
pub mod spec;
pub mod suggest;
pub mod units;
pub mod validate;

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};

pub use diagnostic::{Diagnostic, Kind, Label, Report, render_plain};
pub use lower::{OPERATION_FLAGS, OPERATION_STATEMENTS, stanza_keywords};
pub use parse::{MAX_SOURCE_LEN, MAX_SYNTAX_ERRORS};
pub use source::{Loc, Located, SourceId, Sources};
pub use spec::{
    AdaptiveSpec, AllowanceConfig, Amount, AssetsSpec, Backoff, BreakerConfig, BreakerLocs,
    BreakerSpec, BulkheadConfig, BulkheadLocs, BulkheadSpec, Ceiling, CeilingsSpec, ChaosFault,
    ChaosFaultKind, ChaosLatency, ChaosSpec, Compression, DeadlineConfig, EnvelopeSpec, FailMode,
    HedgeConfig, HedgeDelay, HedgeLocs, HedgeSpec, IsolateSpec, MechanismSpec, Metric, Number,
    OpenAfter, OperationSpec, PoolKind, QuarantineSpec, QueueSpec, Range, Rate, RateLimitConfig,
    RatelimitLocs, RatelimitSpec, RequestSpec, RetryConfig, RetryLocs, RetrySpec, Setting, Sharing,
    SheddingConfig, SheddingSpec, Spec, Unit, WebMetric, WorkClass, Written,
};
pub use spec::{HopKind, HopSpec, LocalitySpec};
pub use validate::validate;

/// A set of policy sources lowered into one [`Spec`], with what was found reading them.
#[derive(Debug, Clone, Default)]
pub struct PolicySet {
    sources: Sources,
    spec: Spec,
    diagnostics: Vec<Diagnostic>,
    dropped: Vec<(&'static str, String)>,
}

impl PolicySet {
    /// An empty set.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses `bytes` (named `name` in diagnostics) and lowers it into the spec. Problems are
    /// kept for [`PolicySet::check`]; nothing here fails or panics.
    pub fn add_source(&mut self, name: impl Into<String>, bytes: &[u8]) -> SourceId {
        let parsed = parse::parse(&mut self.sources, name, bytes);
        self.add_parsed(parsed)
    }

    /// A set over `sources` (already read) holding `diagnostics` found reading them, before
    /// any file is lowered: the overrides' merge builds one.
    #[cfg(feature = "tools")]
    fn with_sources(sources: Sources, diagnostics: Vec<Diagnostic>) -> Self {
        Self {
            sources,
            diagnostics,
            ..Self::default()
        }
    }

    /// Lowers a file already parsed into this set's sources.
    #[cfg(feature = "tools")]
    fn add_file(&mut self, file: &ast::File) {
        let lowered = lower::lower(file, &mut self.spec);
        self.diagnostics.extend(lowered.diagnostics);
        self.dropped.extend(lowered.dropped);
    }

    fn add_parsed(&mut self, parsed: parse::Parsed) -> SourceId {
        let lowered = lower::lower(&parsed.file, &mut self.spec);
        self.diagnostics.extend(parsed.diagnostics);
        self.diagnostics.extend(lowered.diagnostics);
        self.dropped.extend(lowered.dropped);
        parsed.file.source
    }

    /// Reads and adds one file. Only a regular file is read (a named pipe or a device is an
    /// [`io::ErrorKind::InvalidInput`] error, see [`source::read_file`]), and no more of it
    /// than [`MAX_SOURCE_LEN`] and a byte: a larger file is a `policy::too-large` diagnostic,
    /// as from [`PolicySet::add_source`].
    pub fn load_file(&mut self, path: &Path) -> io::Result<SourceId> {
        let parsed = parse::parse_file(&mut self.sources, path)?;
        Ok(self.add_parsed(parsed))
    }

    /// Reads and adds every `*.policy` file of `dir` (not recursive), in name order, and
    /// returns their paths (the macros emit an `include_bytes!` for each so Cargo rebuilds when
    /// one changes). Entries that are not regular files (a named pipe, a device, a dangling
    /// link such as an editor's lock file) are left out without being opened.
    pub fn load_dir(&mut self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut paths = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            if path.extension().is_some_and(|ext| ext == "policy") && path.is_file() {
                paths.push(path);
            }
        }
        paths.sort();
        for path in &paths {
            self.load_file(path)?;
        }
        Ok(paths)
    }

    fn record(&mut self, inserted: Result<(), Box<Diagnostic>>) {
        if let Err(duplicate) = inserted {
            self.diagnostics.push(*duplicate);
        }
    }

    /// Adds an operation (a duplicate name is reported by [`PolicySet::check`]).
    pub fn add_operation(&mut self, operation: OperationSpec) {
        let inserted = self.spec.operations.insert(operation);
        self.record(inserted);
    }

    /// Adds a breaker.
    pub fn add_breaker(&mut self, breaker: BreakerSpec) {
        let inserted = self.spec.breakers.insert(breaker);
        self.record(inserted);
    }

    /// Adds a bulkhead.
    pub fn add_bulkhead(&mut self, bulkhead: BulkheadSpec) {
        let inserted = self.spec.bulkheads.insert(bulkhead);
        self.record(inserted);
    }

    /// Adds a durable queue's numbers.
    pub fn add_queue(&mut self, queue: QueueSpec) {
        let inserted = self.spec.queues.insert(queue);
        self.record(inserted);
    }

    /// Adds a retry policy.
    pub fn add_retry(&mut self, retry: RetrySpec) {
        let inserted = self.spec.retries.insert(retry);
        self.record(inserted);
    }

    /// Adds a hedging policy.
    pub fn add_hedge(&mut self, hedge: HedgeSpec) {
        let inserted = self.spec.hedges.insert(hedge);
        self.record(inserted);
    }

    /// Adds a rate limit.
    pub fn add_ratelimit(&mut self, ratelimit: RatelimitSpec) {
        let inserted = self.spec.ratelimits.insert(ratelimit);
        self.record(inserted);
    }

    /// The model built so far.
    #[must_use]
    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// The model, to change (prefer the `add_*` methods, which report duplicates).
    pub fn spec_mut(&mut self) -> &mut Spec {
        &mut self.spec
    }

    /// The source files read so far.
    #[must_use]
    pub fn sources(&self) -> &Sources {
        &self.sources
    }

    /// Every problem: what reading the sources found, and what the validator finds in the
    /// spec, errors and warnings apart, each sorted by location.
    #[must_use]
    pub fn check(&self) -> Report {
        let validated = validate(&self.spec);
        let dropped: HashSet<(&str, &str)> = self
            .dropped
            .iter()
            .map(|(kind, name)| (*kind, name.as_str()))
            .collect();
        let consequence_of_earlier_error = |diagnostic: &Diagnostic| match &diagnostic.kind {
            Kind::UnknownName { kind, name, .. } => {
                dropped.contains(&(kind.as_str(), name.as_str()))
            }
            _ => false,
        };
        Report::from_diagnostics(
            self.diagnostics
                .iter()
                .cloned()
                .chain(
                    validated
                        .errors
                        .into_iter()
                        .filter(|d| !consequence_of_earlier_error(d)),
                )
                .chain(validated.warnings),
        )
    }

    /// `file:line:col`, the snippet and the labels, in a fixed colourless theme and width.
    #[must_use]
    pub fn render(&self, diagnostic: &Diagnostic) -> String {
        render_plain(diagnostic, &self.sources)
    }
}

/// The crate docs' "Feature flags" table is checked in (`src/features.md`) as the other crates'
/// are, and kept what `document_features!()` renders from the `## ` comments in `Cargo.toml`.
/// `POLICY_BLESS=1 cargo test -p velocity-policy-lang --lib features_table` rewrites it.
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
