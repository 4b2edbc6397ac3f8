//! Diagnostics: what is wrong, where, and how to fix it.
//!
//! A [`Diagnostic`] is a [`Kind`] (the rule that fired, which gives the stable code, the message
//! and the help) plus [`Label`]s pointing at every location involved. Labels carry [`Loc`]s, so
//! the same diagnostic serves a `.policy` file (rendered with a snippet by [`render_plain`] or
//! [`Renderable`]) and the attribute macros (which map [`Loc::External`] back to their spans).

use std::fmt;
use std::ops::Range;

use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, Severity, SourceSpan};

use crate::source::{Loc, Sources};

mod excerpt;

pub use excerpt::{Excerpt, LONG_LINE};

/// The rule a diagnostic comes from. Each variant has a stable code (`velocity_policy::...`), a one-line
/// message and a help text that says the fix; see the table in the crate docs.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Kind {
    // ---- reading the file -------------------------------------------------------------------
    /// The file is not UTF-8.
    #[error("file is not valid UTF-8 (first bad byte at offset {offset})")]
    InvalidUtf8 {
        /// Offset of the first byte that is not UTF-8.
        offset: usize,
    },

    /// The file is larger than a policy file may be.
    #[error("file is {len} bytes, more than the {max} a policy file may have")]
    TooLarge {
        /// Size of the file.
        len: usize,
        /// The limit.
        max: usize,
    },

    /// The text does not follow the grammar.
    #[error("{message}")]
    Syntax {
        /// What was expected and what was found.
        message: String,
        /// How the construct is written.
        help: String,
    },

    // ---- the shape of stanzas ---------------------------------------------------------------
    /// A stanza keyword that does not exist.
    #[error("unknown stanza `{keyword}`")]
    UnknownStanza {
        /// The keyword as written.
        keyword: String,
        /// A suggestion, or the list of stanzas.
        help: String,
    },

    /// A named stanza without a name.
    #[error("`{keyword}` needs a name")]
    MissingName {
        /// The stanza keyword.
        keyword: String,
    },

    /// A name on a stanza that takes none.
    #[error("`{keyword}` takes no name, found `{name}`")]
    UnexpectedName {
        /// The stanza keyword.
        keyword: String,
        /// The name that was given.
        name: String,
    },

    /// Tags (`: critical, idempotent`) on a stanza that takes none.
    #[error("`{keyword}` takes no class or flags")]
    UnexpectedTags {
        /// The stanza keyword.
        keyword: String,
    },

    /// A setting a stanza does not have.
    #[error("unknown setting `{key}` in `{keyword}`")]
    UnknownSetting {
        /// The stanza keyword.
        keyword: String,
        /// The key as written.
        key: String,
        /// A suggestion, or the list of settings.
        help: String,
    },

    /// The same setting twice in one stanza.
    #[error("`{key}` is set twice")]
    DuplicateSetting {
        /// The key.
        key: String,
    },

    /// A required setting is absent.
    #[error("{what} has no `{key}`")]
    MissingSetting {
        /// The stanza (`breaker `payments``).
        what: String,
        /// The missing key.
        key: String,
        /// An example of the setting.
        example: String,
    },

    /// A value of the wrong kind: a number where a duration is wanted, an unknown word.
    #[error("`{key}` expects {expected}, found `{found}`")]
    InvalidValue {
        /// The setting.
        key: String,
        /// What it expects (`a duration like `30s``).
        expected: String,
        /// What was written.
        found: String,
        /// How to write it.
        help: String,
    },

    /// An operation without a class.
    #[error("operation `{operation}` has no class")]
    MissingClass {
        /// The operation.
        operation: String,
    },

    /// An operation with two classes.
    #[error("operation `{operation}` is both `{first}` and `{second}`")]
    ConflictingClasses {
        /// The operation.
        operation: String,
        /// The first class.
        first: String,
        /// The second class.
        second: String,
    },

    /// A tag that is neither a class nor a flag.
    #[error("unknown flag `{flag}` on operation `{operation}`")]
    UnknownFlag {
        /// The operation.
        operation: String,
        /// The tag as written.
        flag: String,
        /// A suggestion, or the list of classes and flags.
        help: String,
    },

    /// Two items of the same kind with one name.
    #[error("{kind} `{name}` is defined twice")]
    DuplicateName {
        /// `breaker`, `operation`, ...
        kind: String,
        /// The name.
        name: String,
    },

    /// A stanza that may appear once appears twice.
    #[error("`{keyword}` is declared twice")]
    DuplicateStanza {
        /// The keyword.
        keyword: String,
    },

    /// A ceiling naming a metric that does not exist.
    #[error("unknown metric `{metric}` in ceilings `{ceilings}`")]
    UnknownMetric {
        /// The `ceilings` stanza's name.
        ceilings: String,
        /// The metric as written.
        metric: String,
        /// A suggestion, or the list of metrics.
        help: String,
    },

    // ---- validation -------------------------------------------------------------------------
    /// A reference to a breaker, bulkhead, retry, hedge or rate limit that is not defined.
    #[error("unknown {kind} `{name}`")]
    UnknownName {
        /// `breaker`, `bulkhead`, `retry`, `hedge` or `ratelimit`.
        kind: String,
        /// The name as written.
        name: String,
        /// A suggestion, or how to define it.
        help: String,
    },

    /// An override that changes what only the compiled policy may say: a class, a flag, which
    /// mechanisms an operation uses, a fallback, how a breaker is shared.
    #[error("`{what}` cannot be overridden at run time")]
    NotOverridable {
        /// The setting or tag, as written.
        what: String,
        /// What may be overridden in this stanza.
        help: String,
    },

    /// An override that moves a compiled number outside its envelope: by default a quarter to
    /// four times the compiled value, and never above it for what keeps a breaker open.
    #[error("`{setting}` in `{stanza}` is outside what an override may set, {range}")]
    OverrideOutsideEnvelope {
        /// The override as written: `cooldown = 1000h`.
        setting: String,
        /// The stanza it tunes: `breaker search`.
        stanza: String,
        /// What it may set: `2.5s to 10s`.
        range: String,
        /// How to widen the envelope.
        help: String,
    },

    /// An override of a number the compiled policy does not set: there is nothing to move it
    /// from, so nothing bounds it.
    #[error("`{setting}` in `{stanza}` overrides a number the compiled policy does not set")]
    OverrideNotCompiled {
        /// The override as written: `attempt_timeout = 1ms`.
        setting: String,
        /// The stanza it tunes: `retry transient`.
        stanza: String,
        /// Where to set it first.
        help: String,
    },

    /// Retry on an operation not marked idempotent.
    #[error("operation `{operation}` is retried but not marked `idempotent`")]
    RetryNotIdempotent {
        /// The operation.
        operation: String,
        /// The retry policy.
        retry: String,
    },

    /// A hedge on an operation not marked idempotent.
    #[error("operation `{operation}` is hedged but not marked `idempotent`")]
    HedgeNotIdempotent {
        /// The operation.
        operation: String,
        /// The hedging policy.
        hedge: String,
    },

    /// A chaos fault's rate, or its share of instances, outside 0 to 100%.
    #[error("chaos `{chaos}`: `{what}` must be a share from 0 to 100%, found `{found}`")]
    ChaosRateOutOfRange {
        /// The chaos.
        chaos: String,
        /// `error`, `latency`, ..., or `instances`.
        what: String,
        /// What was written.
        found: String,
    },

    /// A chaos stanza with no fault.
    #[error("chaos `{chaos}` injects nothing")]
    ChaosEmpty {
        /// The chaos.
        chaos: String,
    },

    /// A chaos window that ends before it starts, or a latency range upside down.
    #[error("chaos `{chaos}`: `{what}` ends before it starts")]
    ChaosRangeReversed {
        /// The chaos.
        chaos: String,
        /// `during`, `uniform` or `lognormal`.
        what: String,
        /// The fix, as text.
        example: String,
    },

    /// A setting of a mechanism's table outside its row's range
    /// ([`Range::Within`](crate::Range::Within)): a hedge's `max` not 2 to the runtime's
    /// bound. The code and the help are the row's.
    #[error("{keyword} `{name}` has `{key} = {found}`, outside {least} to {most}")]
    SettingOutOfRange {
        /// The stanza's keyword: `hedge`.
        keyword: String,
        /// The stanza's name.
        name: String,
        /// The setting: `max`.
        key: String,
        /// What was written.
        found: String,
        /// The smallest value accepted.
        least: String,
        /// The largest value accepted.
        most: String,
        /// The row's stable code: `policy::hedge-max-out-of-range`.
        code: &'static str,
        /// The row's help, its bounds filled in.
        help: String,
    },

    /// Deferred or background work not marked idempotent.
    #[error("{class} operation `{operation}` is not marked `idempotent`")]
    DeferredNotIdempotent {
        /// The operation.
        operation: String,
        /// `deferred` or `background`.
        class: String,
    },

    /// A durable write that is not critical.
    #[error("durable operation `{operation}` is `{class}`, not `critical`")]
    DurableNotCritical {
        /// The operation.
        operation: String,
        /// Its class.
        class: String,
    },

    /// Retry with no deadline above it.
    #[error("operation `{operation}` retries with no deadline above it")]
    RetryWithoutDeadline {
        /// The operation.
        operation: String,
        /// The retry policy.
        retry: String,
    },

    /// `min_budget` larger than the deadline.
    #[error(
        "`min_budget` of operation `{operation}` ({min_budget}) is larger than its deadline ({deadline})"
    )]
    MinBudgetExceedsDeadline {
        /// The operation.
        operation: String,
        /// The minimum budget, formatted.
        min_budget: String,
        /// The effective deadline, formatted.
        deadline: String,
    },

    /// A retry's `attempt_timeout` longer than the deadline of an operation that uses it.
    #[error(
        "`attempt_timeout` of retry `{retry}` ({attempt_timeout}) is longer than the deadline of operation `{operation}` ({deadline})"
    )]
    AttemptTimeoutExceedsDeadline {
        /// The retry policy.
        retry: String,
        /// The operation.
        operation: String,
        /// The attempt timeout, formatted.
        attempt_timeout: String,
        /// The effective deadline, formatted.
        deadline: String,
    },

    /// The request's `min_budget` larger than its deadline.
    #[error("the request's `min_budget` ({min_budget}) is larger than its deadline ({deadline})")]
    RequestMinBudgetExceedsDeadline {
        /// The minimum budget, formatted.
        min_budget: String,
        /// The request deadline, formatted.
        deadline: String,
    },

    /// A zero or negative duration.
    #[error("`{key}` must be longer than zero, found `{found}`")]
    DurationNotPositive {
        /// The setting.
        key: String,
        /// What was written.
        found: String,
    },

    /// A retry with zero attempts.
    #[error("retry `{retry}` has zero attempts")]
    ZeroAttempts {
        /// The retry policy.
        retry: String,
    },

    /// A count that must be at least one.
    #[error("`{key}` must be at least 1, found `0`")]
    ZeroCount {
        /// The setting.
        key: String,
        /// What a zero would mean and what to write instead.
        help: String,
    },

    /// A ratio outside (0, 1].
    #[error("`{key}` must be above 0 and at most 100%, found `{found}`")]
    RatioOutOfRange {
        /// The setting.
        key: String,
        /// What was written.
        found: String,
    },

    /// A shedding threshold outside (0, 1).
    #[error("`{class}` shedding threshold must be strictly between 0 and 1, found `{found}`")]
    SheddingThresholdOutOfRange {
        /// `deferred` or `background`.
        class: String,
        /// What was written.
        found: String,
    },

    /// A fallback or stale answer on work that nobody waits for.
    #[error("{class} operation `{operation}` has `{setting}`, but nobody waits for its answer")]
    FallbackOnScheduled {
        /// The operation.
        operation: String,
        /// `deferred` or `background`.
        class: String,
        /// `fallback` or `stale_if_error`.
        setting: String,
    },

    /// A load threshold for shedding on critical work.
    #[error(
        "critical operation `{operation}` sets `shed_at`, but critical work is never shed for load"
    )]
    ShedCritical {
        /// The operation.
        operation: String,
    },

    /// A rate limit guarding critical work that leaves a failure mode of its store implicit.
    #[error(
        "ratelimit `{ratelimit}` guards critical operation `{operation}` but does not choose {missing}"
    )]
    RatelimitFailModeUnset {
        /// The rate limit.
        ratelimit: String,
        /// The first critical operation it guards.
        operation: String,
        /// `` `on_timeout` ``, `` `on_error` ``, or both.
        missing: String,
        /// The settings to add, as an example.
        example: String,
    },

    /// A bulkhead given both a fixed slot count and adaptive bounds.
    #[error("bulkhead `{bulkhead}` sets both `max_concurrent` and `adaptive`")]
    AdaptiveWithFixedLimit {
        /// The bulkhead.
        bulkhead: String,
        /// The fixed count written.
        max_concurrent: u32,
    },

    /// Adaptive bounds with `min` above `max`.
    #[error("bulkhead `{bulkhead}` adapts between `min = {min}` and a smaller `max = {max}`")]
    AdaptiveBoundsInverted {
        /// The bulkhead.
        bulkhead: String,
        /// Its `min`.
        min: u32,
        /// Its `max`.
        max: u32,
    },

    /// An isolated operation that also names another mechanism, or is not critical.
    #[error("isolated operation `{operation}` also sets `{other}`")]
    IsolateStandsAlone {
        /// The operation.
        operation: String,
        /// The other setting, or `deferred`/`background`.
        other: String,
    },

    /// A durable queue on work that is not background work.
    #[error("{class} operation `{operation}` is put on queue `{queue}`")]
    QueueNotBackground {
        /// The operation.
        operation: String,
        /// Its class.
        class: String,
        /// The queue it names.
        queue: String,
    },

    /// A queue's task deadline longer than four fifths of its visibility timeout.
    #[error(
        "`task_deadline` of queue `{queue}` ({task_deadline}) is longer than four fifths of its visibility timeout ({visibility})"
    )]
    TaskDeadlineExceedsVisibility {
        /// The queue.
        queue: String,
        /// Its task deadline, formatted.
        task_deadline: String,
        /// Its visibility timeout (declared or the default), formatted.
        visibility: String,
        /// The longest task deadline it allows (four fifths of it), formatted.
        bound: String,
    },

    /// Background shed later than deferred.
    #[error("`background` is shed at load {background}, later than `deferred` at {deferred}")]
    SheddingThresholdsInverted {
        /// The background threshold, formatted.
        background: String,
        /// The deferred threshold, formatted.
        deferred: String,
    },

    /// Backoff base above its cap.
    #[error("backoff of retry `{retry}` starts at {base}, above its cap of {cap}")]
    BackoffBaseAboveCap {
        /// The retry policy.
        retry: String,
        /// The base, formatted.
        base: String,
        /// The cap, formatted.
        cap: String,
    },

    /// A size ceiling of zero in an `assets` stanza.
    #[error("`{key}` is a ceiling of zero bytes")]
    ZeroSize {
        /// The setting.
        key: String,
        /// What a zero would mean and what to write instead.
        help: String,
    },

    /// A `locality` stanza that declares no hop.
    #[error("`locality` declares no hop")]
    EmptyLocality,

    /// A hop kind that is neither `blocking` nor `async`.
    #[error("unknown hop kind `{kind}` for `{hop}`")]
    UnknownHopKind {
        /// The hop.
        hop: String,
        /// The kind as written.
        kind: String,
        /// A suggestion, or the two kinds.
        help: String,
    },

    /// Two hops located by one variable.
    #[error("hops `{first}` and `{second}` are both located by `{variable}`")]
    DuplicateVariable {
        /// The variable.
        variable: String,
        /// The hop that named it first.
        first: String,
        /// The hop that named it again.
        second: String,
    },

    // ---- warnings ---------------------------------------------------------------------------
    /// An operation's queue is not declared, but a declared one has a close name.
    #[error("queue `{queue}` of operation `{operation}` is not declared, but `{declared}` is")]
    UndeclaredQueue {
        /// The operation.
        operation: String,
        /// The queue it names.
        queue: String,
        /// The declared queue with a close name.
        declared: String,
    },

    /// An operation deadline longer than the request deadline.
    #[error(
        "deadline of operation `{operation}` ({deadline}) is longer than the request deadline ({request})"
    )]
    DeadlineClamped {
        /// The operation.
        operation: String,
        /// Its deadline, formatted.
        deadline: String,
        /// The request deadline, formatted.
        request: String,
    },

    /// Retry attempts that cannot start within the deadline.
    #[error(
        "operation `{operation}` allows {attempts} attempts but only {reachable} can start within {deadline} when attempts time out"
    )]
    UnreachableAttempts {
        /// The operation.
        operation: String,
        /// Attempts configured.
        attempts: u32,
        /// Attempts that can start.
        reachable: u32,
        /// The effective deadline, formatted.
        deadline: String,
    },

    /// `large_image` at or above `max_image`: the large-image rules cannot fire on an image that
    /// passes the ceiling.
    #[error("`large_image` ({large_image}) is not below `max_image` ({max_image})")]
    LargeImageAboveMax {
        /// The large-image threshold, formatted.
        large_image: String,
        /// The ceiling, formatted.
        max_image: String,
    },

    /// A bulkhead queue that stores a backlog.
    #[error("bulkhead `{bulkhead}` queues up to {max_queued} callers for {max_concurrent} slots")]
    QueueStoresBacklog {
        /// The bulkhead.
        bulkhead: String,
        /// Its queue length.
        max_queued: u32,
        /// Its concurrency.
        max_concurrent: u32,
        /// The largest queue that does not warn.
        limit: u64,
    },

    // ---- checked against an environment (`policy locality --check`) -------------------------
    /// A blocking hop to a service in another region than the compute.
    #[error(
        "blocking hop `{hop}` crosses regions: the compute runs in `{compute}`, the service in `{service}`"
    )]
    CrossRegionHop {
        /// The hop.
        hop: String,
        /// The compute's region.
        compute: String,
        /// The service's region.
        service: String,
    },

    /// A hop whose variable locates no service in the environment checked.
    #[error("hop `{hop}` cannot be located: {why}")]
    HopNotLocated {
        /// The hop.
        hop: String,
        /// Its variable.
        variable: String,
        /// Why it locates nothing (never the variable's value).
        why: String,
    },

    /// A blocking hop whose relation to the compute the environment does not reveal: the
    /// compute's region or the service's is unknown, or the two are in different clouds.
    #[error("cannot tell whether blocking hop `{hop}` crosses regions: {reason}")]
    UnknownRegion {
        /// The hop.
        hop: String,
        /// Why the region is unknown, as the locality probe says it.
        reason: String,
        /// What to do about it.
        help: String,
    },
}

impl Kind {
    /// The stable code, such as `policy::retry-not-idempotent`.
    #[must_use]
    pub fn code(&self) -> String {
        self.rule().code.to_owned()
    }

    /// Whether this is an error or a warning.
    #[must_use]
    pub fn severity(&self) -> Severity {
        self.rule().severity
    }

    /// The help text: the fix, or a "did you mean".
    #[must_use]
    pub fn help(&self) -> Option<String> {
        Some(self.rule().help)
    }

    /// Each rule's code, severity and help, beside its message (the `#[error]` above).
    ///
    /// Written out rather than derived with `miette::Diagnostic`: miette's derive is built on
    /// syn 2, while these attributes' macros and tokio's are on syn 3, so the derive would put a
    /// second syn into every user's first build (see BENCHMARKS.md, "First build").
    fn rule(&self) -> Rule {
        match self {
            Kind::InvalidUtf8 { .. } => Rule::error("policy::invalid-utf8", "save the file as UTF-8 text".to_owned()),
            Kind::TooLarge { .. } => Rule::error("policy::too-large", "split the policy across several files in the same directory".to_owned()),
            Kind::Syntax { help, .. } => Rule::error("policy::syntax", help.clone()),
            Kind::UnknownStanza { help, .. } => Rule::error("policy::unknown-stanza", help.clone()),
            Kind::MissingName { keyword, .. } => Rule::error("policy::missing-name", format!("write it as `{keyword} NAME {{ ... }}`")),
            Kind::UnexpectedName { keyword, .. } => Rule::error("policy::unexpected-name", format!("there is one `{keyword}` stanza per policy: write it as `{keyword} {{ ... }}`")),
            Kind::UnexpectedTags { .. } => Rule::error("policy::unexpected-tags", "only an `operation` has a class and flags; remove `: ...` from this header".to_owned()),
            Kind::UnknownSetting { help, .. } => Rule::error("policy::unknown-setting", help.clone()),
            Kind::DuplicateSetting { key, .. } => Rule::error("policy::duplicate-setting", format!("keep one `{key}` and remove the other")),
            Kind::MissingSetting { example, .. } => Rule::error("policy::missing-setting", format!("add `{example}`")),
            Kind::InvalidValue { help, .. } => Rule::error("policy::invalid-value", help.clone()),
            Kind::MissingClass { operation, .. } => Rule::error("policy::missing-class", format!("give it one after its name: `operation {operation}: critical {{ ... }}` (critical, deferred or background)")),
            Kind::ConflictingClasses { first, second, .. } => Rule::error("policy::conflicting-classes", format!("an operation has one class: keep `{first}` or `{second}`")),
            Kind::UnknownFlag { help, .. } => Rule::error("policy::unknown-flag", help.clone()),
            Kind::DuplicateName { .. } => Rule::error("policy::duplicate-name", "rename one of them, or remove the second definition".to_owned()),
            Kind::DuplicateStanza { keyword, .. } => Rule::error("policy::duplicate-stanza", format!("merge the two `{keyword}` stanzas into one")),
            Kind::UnknownMetric { help, .. } => Rule::error("policy::unknown-metric", help.clone()),
            Kind::UnknownName { help, .. } => Rule::error("policy::unknown-name", help.clone()),
            Kind::NotOverridable { help, .. } => Rule::error("policy::not-overridable", help.clone()),
            Kind::OverrideOutsideEnvelope { help, .. } => Rule::error("policy::override-outside-envelope", help.clone()),
            Kind::OverrideNotCompiled { help, .. } => Rule::error("policy::override-outside-envelope", help.clone()),
            Kind::RetryNotIdempotent { operation, retry, .. } => Rule::error("policy::retry-not-idempotent", format!("a network timeout is exactly when the first attempt may have succeeded unseen: mark `{operation}` `idempotent` if running it twice is safe, or remove `retry = {retry}`")),
            Kind::HedgeNotIdempotent { operation, hedge, .. } => Rule::error("policy::hedge-not-idempotent", format!("a hedge runs the work a second time while the first may still succeed: mark `{operation}` `idempotent` if running it twice at once is safe, or remove `hedge = {hedge}`")),
            Kind::ChaosRateOutOfRange { .. } => Rule::error("policy::chaos-rate-out-of-range", "a rate is the share of attempts the fault is injected into: `error at 5%` or `error at 0.05`; `0%` declares it and injects nothing until a run-time switch raises it".to_owned()),
            Kind::ChaosEmpty { .. } => Rule::error("policy::chaos-empty", "give it at least one fault with its rate: `latency = 300ms at 10%`, `error at 5%`, `refuse at 1%` or `status 429 retry_after 5s at 2%`".to_owned()),
            Kind::ChaosRangeReversed { example, .. } => Rule::error("policy::chaos-range-reversed", format!("write the smaller first: `{example}`")),
            Kind::SettingOutOfRange { code, help, .. } => Rule::error(code, help.clone()),
            Kind::DeferredNotIdempotent { class, .. } => Rule::error("policy::deferred-not-idempotent", format!("{class} work is delivered at least once and may run twice: make it idempotent and add the flag (`{class}, idempotent`), or make it `critical`")),
            Kind::DurableNotCritical { operation, .. } => Rule::error("policy::durable-not-critical", format!("a write that must be acknowledged happens before the response: make `{operation}` `critical`, or drop `durable` if losing it is acceptable")),
            Kind::RetryWithoutDeadline { operation, .. } => Rule::error("policy::retry-without-deadline", format!("a retry without a deadline turns a bad minute into an outage: add `deadline = ...` to `{operation}`, or a `request {{ deadline = ... }}` stanza")),
            Kind::MinBudgetExceedsDeadline { deadline, .. } => Rule::error("policy::min-budget-exceeds-deadline", format!("the operation could never start: lower `min_budget` below {deadline}, or raise the deadline")),
            Kind::AttemptTimeoutExceedsDeadline { deadline, .. } => Rule::error("policy::attempt-timeout-exceeds-deadline", format!("an attempt can never run to its timeout: lower `attempt_timeout` to {deadline} or less, or raise the deadline")),
            Kind::RequestMinBudgetExceedsDeadline { deadline, .. } => Rule::error("policy::request-min-budget-exceeds-deadline", format!("every request would be refused before it starts: lower `min_budget` below {deadline}, or raise the deadline")),
            Kind::DurationNotPositive { key, .. } => Rule::error(velocity_policy_model::Range::POSITIVE_CODE, format!("a zero or negative `{key}` can never be met: give a positive duration such as `100ms`")),
            Kind::ZeroAttempts { .. } => Rule::error("policy::zero-attempts", "`attempts` counts the first attempt too: use `attempts = 1` for no retry, or more to retry".to_owned()),
            Kind::ZeroCount { help, .. } => Rule::error("policy::zero-count", help.clone()),
            Kind::RatioOutOfRange { .. } => Rule::error("policy::ratio-out-of-range", "write a share such as `50%` or `0.5`".to_owned()),
            Kind::SheddingThresholdOutOfRange { class, .. } => Rule::error("policy::shedding-threshold-out-of-range", format!("a threshold is the load at which `{class}` work is shed: at 0 it is always shed, at 1 never before the bulkhead refuses; pick a value such as `0.5`")),
            Kind::FallbackOnScheduled { class, setting, .. } => Rule::error("policy::fallback-on-scheduled", format!("a fallback answers a caller in place of the real result; {class} work returns nothing to its caller, so remove `{setting}` (its failures are logged with its name)")),
            Kind::ShedCritical { operation, .. } => Rule::error("policy::shed-critical", format!("when there is truly no room, a bulkhead refuses critical work visibly (a 503) instead: remove `shed_at`, or make `{operation}` deferred or background")),
            Kind::RatelimitFailModeUnset { example, .. } => Rule::error("policy::ratelimit-fail-mode-unset", format!("what critical work does when the limiter's store is slow or down is a decision, not a default: `closed` refuses (a limiter guarding unbounded work), `open` admits (best-effort work), `local` enforces this instance's own rate; for example add {example}")),
            Kind::AdaptiveWithFixedLimit { max_concurrent, .. } => Rule::error("policy::adaptive-with-fixed-limit", format!("an adaptive bulkhead's slot count moves between `min` and `max`, so it has no fixed one: remove `max_concurrent = {max_concurrent}` (or remove `adaptive(...)` to keep a fixed count)")),
            Kind::AdaptiveBoundsInverted { max, min, .. } => Rule::error("policy::adaptive-bounds-inverted", format!("the slot count moves from `min` up to `max`: make `min` at most `max`, for example `adaptive(min = {max}, max = {min})`")),
            Kind::IsolateStandsAlone { other, operation, .. } => Rule::error("policy::isolate-stands-alone", format!("`isolate` runs a synchronous function on a pool and is waited for within its caller's deadline, so it takes nothing else: remove `{other}`, and put it on the critical or resilient operation that calls `{operation}`")),
            Kind::QueueNotBackground { operation, .. } => Rule::error("policy::queue-not-background", format!("a durable queue runs background work, later and on any instance: make `{operation}` `background`, or remove `queue`")),
            Kind::TaskDeadlineExceedsVisibility { bound, .. } => Rule::error("policy::task-deadline-exceeds-visibility", format!("a task still running when another worker may claim it runs twice at once, and the last fifth absorbs the acknowledgement's round trip and clock skew (the worker would lower the deadline to {bound}): lower `task_deadline` to {bound} or less, or raise `visibility_timeout`")),
            Kind::SheddingThresholdsInverted { deferred, .. } => Rule::error("policy::shedding-thresholds-inverted", format!("background work is the first to go: set its threshold at or below {deferred}")),
            Kind::BackoffBaseAboveCap { cap, .. } => Rule::error("policy::backoff-base-above-cap", format!("`base` is the first delay and `cap` the largest: make `base` at most {cap}")),
            Kind::ZeroSize { help, .. } => Rule::error("policy::zero-size", help.clone()),
            Kind::EmptyLocality => Rule::error("policy::empty-locality", "declare each call a request makes, one per line, such as `database = blocking env DATABASE_URL`; or remove the stanza".to_owned()),
            Kind::UnknownHopKind { help, .. } => Rule::error("policy::unknown-hop-kind", help.clone()),
            Kind::DuplicateVariable { .. } => Rule::error("policy::duplicate-variable", "one variable locates one service, so these are one hop: declare it once (`blocking` if the request ever waits for it), or name the variable of the other service".to_owned()),
            Kind::UndeclaredQueue { declared, .. } => Rule::warning("policy::undeclared-queue", format!("did you mean `{declared}`? an undeclared queue runs with the runtime's defaults, not the numbers of `queue {declared}`")),
            Kind::DeadlineClamped { request, .. } => Rule::warning("policy::deadline-clamped", format!("a child never outlives its parent, so it will be clamped to {request}: lower it to say what will happen")),
            Kind::UnreachableAttempts { reachable, .. } => Rule::warning("policy::unreachable-attempts", format!("attempt timeouts and backoff use up the deadline first: lower `attempts` to {reachable}, shorten `attempt_timeout`, or raise the deadline")),
            Kind::LargeImageAboveMax { max_image, .. } => Rule::warning("policy::large-image-above-max", format!("every large image is already over the ceiling, so the `srcset` and lazy-loading rules only repeat it: lower `large_image` below {max_image}")),
            Kind::QueueStoresBacklog { limit, .. } => Rule::warning("policy::queue-stores-backlog", format!("a queue absorbs a burst, it does not store a backlog: callers past the cap should be refused; keep `max_queued` at most {limit}")),
            Kind::CrossRegionHop { service, compute, .. } => Rule::error("policy::cross-region-hop", format!("the request pays the distance on every round trip: move the compute to `{service}` or the service to `{compute}`, or make the hop `async` if the request need not wait for it")),
            Kind::HopNotLocated { variable, .. } => Rule::error("policy::hop-not-located", format!("set `{variable}` to the service's connection string in the environment checked (or in the `--env-file`), or name the variable that holds it")),
            Kind::UnknownRegion { help, .. } => Rule::warning("policy::unknown-region", help.clone()),
        }
    }
}

/// What [`miette::Diagnostic`] asks of a [`Kind`] or a [`FindingKind`](crate::bound::FindingKind).
pub(crate) struct Rule {
    pub(crate) code: &'static str,
    pub(crate) severity: Severity,
    pub(crate) help: String,
}

impl Rule {
    pub(crate) fn error(code: &'static str, help: String) -> Self {
        Rule {
            code,
            severity: Severity::Error,
            help,
        }
    }

    pub(crate) fn warning(code: &'static str, help: String) -> Self {
        Rule {
            code,
            severity: Severity::Warning,
            help,
        }
    }
}

impl miette::Diagnostic for Kind {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(self.rule().code))
    }

    fn severity(&self) -> Option<Severity> {
        Some(self.rule().severity)
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(self.rule().help))
    }
}

/// A location involved in a diagnostic, with what to say about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Label {
    /// Where.
    pub loc: Loc,
    /// What about it (`retried here`, `first defined here`).
    pub text: String,
}

/// One problem found in a policy: the rule, and labels on every location involved. The first
/// label is the primary one.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    /// The rule that fired.
    pub kind: Kind,
    /// The locations involved, primary first.
    pub labels: Vec<Label>,
}

impl Diagnostic {
    /// A diagnostic with one label.
    #[must_use]
    pub fn new(kind: Kind, loc: Loc, text: impl Into<String>) -> Self {
        Diagnostic {
            kind,
            labels: vec![Label {
                loc,
                text: text.into(),
            }],
        }
    }

    /// Adds a secondary label.
    #[must_use]
    pub fn with_label(mut self, loc: Loc, text: impl Into<String>) -> Self {
        self.labels.push(Label {
            loc,
            text: text.into(),
        });
        self
    }

    /// The stable code.
    #[must_use]
    pub fn code(&self) -> String {
        self.kind.code()
    }

    /// The one-line message.
    #[must_use]
    pub fn message(&self) -> String {
        self.kind.to_string()
    }

    /// The help text.
    #[must_use]
    pub fn help(&self) -> Option<String> {
        self.kind.help()
    }

    /// Error or warning.
    #[must_use]
    pub fn severity(&self) -> Severity {
        self.kind.severity()
    }

    /// Whether this is an error (not a warning).
    #[must_use]
    pub fn is_error(&self) -> bool {
        matches!(self.severity(), Severity::Error)
    }

    /// The primary location.
    #[must_use]
    pub fn primary_loc(&self) -> Option<Loc> {
        self.labels.first().map(|label| label.loc)
    }

    pub(crate) fn sort_key(&self) -> (u32, u32, u32) {
        self.primary_loc()
            .map_or((u32::MAX, u32::MAX, 0), |loc| loc.sort_key())
    }

    /// This diagnostic with the source text its labels need, ready for a miette handler.
    #[must_use]
    pub fn renderable<'a>(&'a self, sources: &'a Sources) -> Renderable<'a> {
        Renderable::new(&self.kind, &self.labels, sources)
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.kind, f)
    }
}

impl std::error::Error for Diagnostic {}

/// A rule's report paired with the sources its labels point into, so that miette can draw its
/// snippet: the one adapter from a policy's locations to miette, for the language's diagnostics
/// and for the checks of the `policy` command that report on policy text (`policy::gate::...`).
/// Labels in the primary label's file are drawn in the snippet; labels in other files become
/// related reports with their own snippet; [`Loc::External`] labels are left to their front end.
///
/// The snippets are [`Excerpt`]s: building and drawing one costs the size of what is drawn, not
/// of the file, and long lines are cut around the labels, so a report of any file, of any
/// number of diagnostics, takes time linear in their number and never panics on a wide column.
pub struct Renderable<'a> {
    rule: &'a dyn miette::Diagnostic,
    source: Option<Excerpt>,
    labels: Vec<LabeledSpan>,
    related: Vec<Renderable<'a>>,
    secondary: bool,
}

impl fmt::Debug for Renderable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Renderable")
            .field("rule", &self.rule.to_string())
            .field("labels", &self.labels)
            .field("related", &self.related)
            .finish_non_exhaustive()
    }
}

impl<'a> Renderable<'a> {
    /// `rule` (its code, message, severity and help, as its `miette::Diagnostic` says) with
    /// `labels`, the first one primary, drawn from `sources`.
    #[must_use]
    pub fn new(
        rule: &'a dyn miette::Diagnostic,
        labels: &'a [Label],
        sources: &'a Sources,
    ) -> Self {
        let primary = labels.iter().find_map(|label| label.loc.source());
        let text = |label: &Label| (!label.text.is_empty()).then(|| label.text.clone());
        let mut in_primary: Vec<(usize, Range<usize>)> = Vec::new();
        let mut related = Vec::new();
        for (index, label) in labels.iter().enumerate() {
            let (Some(source), Some(range)) = (label.loc.source(), label.loc.range()) else {
                continue;
            };
            if Some(source) == primary {
                in_primary.push((index, range));
                continue;
            }
            let Some(file) = sources.get(source) else {
                continue;
            };
            let (excerpt, spans) = Excerpt::new(file, std::slice::from_ref(&range));
            related.push(Renderable {
                rule,
                source: Some(excerpt),
                labels: spans
                    .into_iter()
                    .map(|span| LabeledSpan::new_with_span(text(label), span_of(span)))
                    .collect(),
                related: Vec::new(),
                secondary: true,
            });
        }
        let (source, spans) = match primary.and_then(|id| sources.get(id)) {
            Some(file) => {
                let ranges: Vec<Range<usize>> =
                    in_primary.iter().map(|(_, range)| range.clone()).collect();
                let (excerpt, spans) = Excerpt::new(file, &ranges);
                let spans = in_primary
                    .iter()
                    .zip(spans)
                    .map(|(&(index, _), span)| {
                        let text = labels.get(index).and_then(text);
                        if index == 0 {
                            LabeledSpan::new_primary_with_span(text, span_of(span))
                        } else {
                            LabeledSpan::new_with_span(text, span_of(span))
                        }
                    })
                    .collect();
                (Some(excerpt), spans)
            }
            None => (None, Vec::new()),
        };
        Renderable {
            rule,
            source,
            labels: spans,
            related,
            secondary: false,
        }
    }
}

fn span_of(range: Range<usize>) -> SourceSpan {
    SourceSpan::new(range.start.into(), range.end - range.start)
}

impl fmt::Display for Renderable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.secondary {
            f.write_str("see also")
        } else {
            fmt::Display::fmt(self.rule, f)
        }
    }
}

impl std::error::Error for Renderable<'_> {}

impl miette::Diagnostic for Renderable<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        if self.secondary {
            None
        } else {
            self.rule.code()
        }
    }

    fn severity(&self) -> Option<Severity> {
        Some(if self.secondary {
            Severity::Advice
        } else {
            self.rule.severity().unwrap_or(Severity::Error)
        })
    }

    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        if self.secondary {
            None
        } else {
            self.rule.help()
        }
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.source
            .as_ref()
            .map(|source| source as &dyn miette::SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        if self.labels.is_empty() {
            None
        } else {
            Some(Box::new(self.labels.iter().cloned()))
        }
    }

    fn related<'b>(&'b self) -> Option<Box<dyn Iterator<Item = &'b dyn miette::Diagnostic> + 'b>> {
        if self.related.is_empty() {
            None
        } else {
            Some(Box::new(
                self.related
                    .iter()
                    .map(|related| related as &dyn miette::Diagnostic),
            ))
        }
    }
}

/// Width of [`render_plain`]'s output.
pub const PLAIN_WIDTH: usize = 100;

/// Renders a diagnostic as `file:line:col` with a snippet and its labels, in a fixed colourless
/// theme and width: stable across terminals, so it can be snapshotted or embedded in a compile
/// error.
#[must_use]
pub fn render_plain(diagnostic: &Diagnostic, sources: &Sources) -> String {
    let handler = GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor())
        .with_width(PLAIN_WIDTH)
        .with_links(false);
    let mut out = String::new();
    let renderable = diagnostic.renderable(sources);
    if handler.render_report(&mut out, &renderable).is_err() {
        // Rendering into a String cannot fail short of a formatting bug; fall back to one line.
        out = format!("{}: {}", diagnostic.code(), diagnostic.message());
    }
    out
}

/// The diagnostics of a check: errors and warnings, each sorted by location.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Problems that make the policy invalid.
    pub errors: Vec<Diagnostic>,
    /// Problems worth fixing that do not make the policy invalid.
    pub warnings: Vec<Diagnostic>,
}

impl Report {
    /// Splits diagnostics by severity and sorts each list by location.
    #[must_use]
    pub fn from_diagnostics(diagnostics: impl IntoIterator<Item = Diagnostic>) -> Self {
        let (mut errors, mut warnings): (Vec<_>, Vec<_>) =
            diagnostics.into_iter().partition(Diagnostic::is_error);
        errors.sort_by_key(Diagnostic::sort_key);
        warnings.sort_by_key(Diagnostic::sort_key);
        Report { errors, warnings }
    }

    /// Whether any error was found.
    #[must_use]
    pub fn has_errors(&self) -> bool {
        !self.errors.is_empty()
    }

    /// Errors and warnings together, sorted by location.
    #[must_use]
    pub fn all(&self) -> Vec<&Diagnostic> {
        let mut all: Vec<&Diagnostic> = self.errors.iter().chain(&self.warnings).collect();
        all.sort_by_key(|diagnostic| diagnostic.sort_key());
        all
    }
}
