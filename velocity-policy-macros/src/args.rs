//! Step 1: the attributes' arguments, each kept with its span.
//!
//! Every policy attribute on a function is read by whichever of them expands first: the others
//! are taken off the function and their arguments merged, so `#[resilient(..)]` and
//! `#[idempotent]` may come in any order. Each option is parsed with `syn::meta::parser`; a
//! duplicate is rejected where it is set, an unknown key lists the valid ones with a "did you
//! mean", and parsing goes on so every mistake is reported at once.

use std::time::Duration;

use proc_macro2::{Span, TokenStream};
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned as _;
use syn::{Attribute, LitFloat, LitInt, LitStr, Token};
use velocity_policy_lang::{
    BreakerConfig, BulkheadConfig, HedgeConfig, Number, RetryConfig, Setting, Unit,
};

/// Which attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttrKind {
    Critical,
    Deferred,
    Background,
    Resilient,
    Idempotent,
    Operation,
    Isolate,
}

/// Keys the mechanism-bearing attributes share.
const COMMON_KEYS: &[&str] = &[
    "deadline",
    "min_budget",
    "expected_cost",
    "breaker",
    "bulkhead",
    "retry",
    "hedge",
    "ratelimit",
    "chaos",
    "durable",
    "shed_at",
    "fallback",
    "fallback_on_failure",
    "stale_if_error",
    "poll_budget",
];

/// Keys of `#[isolate]`.
const ISOLATE_KEYS: &[&str] = &["max_concurrent", "max_queued", "pool"];

impl AttrKind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Critical => "critical",
            Self::Deferred => "deferred",
            Self::Background => "background",
            Self::Resilient => "resilient",
            Self::Idempotent => "idempotent",
            Self::Operation => "operation",
            Self::Isolate => "isolate",
        }
    }

    const ALL: [AttrKind; 7] = [
        Self::Critical,
        Self::Deferred,
        Self::Background,
        Self::Resilient,
        Self::Idempotent,
        Self::Operation,
        Self::Isolate,
    ];

    /// `#[velocity_policy::critical]` (or under the name the crate gave the facade, `#[pol::critical]`),
    /// or `#[critical]` after `use velocity_policy::critical`.
    pub(crate) fn from_path(path: &syn::Path) -> Option<Self> {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        let last = match segments.as_slice() {
            [only] => only,
            [first, last] if crate::facade::names_facade(first) => last,
            _ => return None,
        };
        Self::ALL.into_iter().find(|kind| kind.name() == last)
    }

    /// The keys this attribute takes.
    fn keys(self) -> Vec<&'static str> {
        match self {
            Self::Idempotent | Self::Operation => Vec::new(),
            Self::Isolate => ISOLATE_KEYS.to_vec(),
            // Background work alone may go to a durable queue.
            Self::Background => [COMMON_KEYS, &["queue"]].concat(),
            _ => COMMON_KEYS.to_vec(),
        }
    }

    /// The work class it declares, if it declares one.
    pub(crate) fn class(self) -> Option<velocity_policy_lang::WorkClass> {
        match self {
            Self::Critical => Some(velocity_policy_lang::WorkClass::Critical),
            Self::Deferred => Some(velocity_policy_lang::WorkClass::Deferred),
            Self::Background => Some(velocity_policy_lang::WorkClass::Background),
            Self::Resilient | Self::Idempotent | Self::Operation | Self::Isolate => None,
        }
    }
}

/// A value and the span of the tokens it was written with.
#[derive(Debug, Clone)]
pub(crate) struct Spanned<T> {
    pub(crate) value: T,
    pub(crate) span: Span,
}

/// A mechanism named in the policy files, or given inline.
#[derive(Debug, Clone)]
pub(crate) enum Ref<I> {
    Named(Spanned<String>),
    Inline(I, Span),
}

/// The settings of a mechanism's table ([`Setting`]) an inline mechanism wrote, by key.
pub(crate) type Written = Vec<(&'static str, Spanned<Number>)>;

/// `breaker(failures = 5, within = "30s", cooldown = "20s")`, or with `ratio = 0.5,
/// min_calls = 20` instead of `failures`; `quorum = 2` or `trips_only` to share; the settings
/// of [`BreakerConfig::SETTINGS`] (`probation = "5s"`).
#[derive(Debug, Clone, Default)]
pub(crate) struct InlineBreaker {
    pub(crate) failures: Option<Spanned<u32>>,
    pub(crate) ratio: Option<Spanned<f64>>,
    pub(crate) min_calls: Option<Spanned<u32>>,
    pub(crate) within: Option<Spanned<Duration>>,
    pub(crate) cooldown: Option<Spanned<Duration>>,
    pub(crate) quorum: Option<Spanned<u32>>,
    pub(crate) trips_only: Option<Span>,
    pub(crate) settings: Written,
}

/// `bulkhead(max_concurrent = 4, max_queued = 2)`, or `adaptive(min = 4, max = 64)` instead
/// of `max_concurrent`; the settings of [`BulkheadConfig::SETTINGS`].
#[derive(Debug, Clone, Default)]
pub(crate) struct InlineBulkhead {
    pub(crate) max_concurrent: Option<Spanned<u32>>,
    pub(crate) adaptive: Option<Spanned<InlineAdaptive>>,
    pub(crate) settings: Written,
}

/// `adaptive(min = 4, max = 64)`, inside `bulkhead(...)`.
#[derive(Debug, Clone, Default)]
pub(crate) struct InlineAdaptive {
    pub(crate) min: Option<Spanned<u32>>,
    pub(crate) max: Option<Spanned<u32>>,
}

/// `retry(attempts = 3, base = "50ms", cap = "1s", attempt_timeout = "2s")`: the settings of
/// [`RetryConfig::SETTINGS`] besides the attempts and the backoff.
#[derive(Debug, Clone, Default)]
pub(crate) struct InlineRetry {
    pub(crate) attempts: Option<Spanned<u32>>,
    pub(crate) base: Option<Spanned<Duration>>,
    pub(crate) cap: Option<Spanned<Duration>>,
    pub(crate) settings: Written,
}

/// `hedge(after = "p95", max = 2)`, or `after = "50ms"`: the settings of
/// [`HedgeConfig::SETTINGS`] besides the delay.
#[derive(Debug, Clone, Default)]
pub(crate) struct InlineHedge {
    pub(crate) after: Option<Spanned<velocity_policy_lang::HedgeDelay>>,
    pub(crate) settings: Written,
}

/// Everything the policy attributes on one function say.
#[derive(Debug, Clone, Default)]
pub(crate) struct Args {
    /// The class, the attribute that declared it and its span.
    pub(crate) class: Option<(velocity_policy_lang::WorkClass, AttrKind, Span)>,
    pub(crate) resilient: Option<Span>,
    pub(crate) idempotent: Option<Span>,
    pub(crate) durable: Option<Span>,
    pub(crate) operation: Option<Spanned<String>>,
    pub(crate) deadline: Option<Spanned<Duration>>,
    pub(crate) min_budget: Option<Spanned<Duration>>,
    pub(crate) expected_cost: Option<Spanned<Duration>>,
    pub(crate) shed_at: Option<Spanned<f64>>,
    pub(crate) breaker: Option<Ref<InlineBreaker>>,
    pub(crate) bulkhead: Option<Ref<InlineBulkhead>>,
    pub(crate) retry: Option<Ref<InlineRetry>>,
    pub(crate) hedge: Option<Ref<InlineHedge>>,
    /// A rate limit of the policy files, by name.
    pub(crate) ratelimit: Option<Spanned<String>>,
    /// A chaos drill of the policy files, by name.
    pub(crate) chaos: Option<Spanned<String>>,
    pub(crate) fallback: Option<Spanned<String>>,
    pub(crate) fallback_on_failure: Option<Span>,
    pub(crate) stale_if_error: Option<Spanned<Duration>>,
    pub(crate) poll_budget: Option<Spanned<Duration>>,
    /// The durable queue background work is enqueued on, by name.
    pub(crate) queue: Option<Spanned<String>>,
    /// `#[isolate]`, where it was written.
    pub(crate) isolate: Option<Span>,
    pub(crate) max_concurrent: Option<Spanned<u32>>,
    pub(crate) max_queued: Option<Spanned<u32>>,
    pub(crate) pool: Option<Spanned<String>>,
}

/// Errors collected while parsing, reported together.
#[derive(Default)]
pub(crate) struct Errors {
    errors: Vec<syn::Error>,
}

impl Errors {
    pub(crate) fn push(&mut self, error: syn::Error) {
        self.errors.push(error);
    }

    pub(crate) fn at(&mut self, span: Span, message: impl std::fmt::Display) {
        self.push(syn::Error::new(span, message));
    }

    /// Whether nothing went wrong so far.
    pub(crate) fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// One error carrying all of them, or `None`.
    pub(crate) fn combined(self) -> Option<syn::Error> {
        let mut iter = self.errors.into_iter();
        let mut first = iter.next()?;
        for error in iter {
            first.combine(error);
        }
        Some(first)
    }
}

/// `did you mean `x`?` when one of `candidates` is close to `input`.
fn suggestion(input: &str, candidates: &[&str]) -> String {
    let listed = candidates
        .iter()
        .map(|c| format!("`{c}`"))
        .collect::<Vec<_>>()
        .join(", ");
    match velocity_policy_lang::suggest::closest(input, candidates.iter().copied()) {
        Some(close) => format!("did you mean `{close}`? valid keys are {listed}"),
        None => format!("valid keys are {listed}"),
    }
}

/// Stores `value` (spanned on its own tokens) unless the key was already set, which is an
/// error at the key.
fn set_once<T>(
    slot: &mut Option<Spanned<T>>,
    value: Spanned<T>,
    key_span: Span,
    key: &str,
    errors: &mut Errors,
) {
    if slot.is_some() {
        errors.at(key_span, format!("`{key}` is set twice: keep one"));
    } else {
        *slot = Some(value);
    }
}

fn duration(meta: &ParseNestedMeta<'_>) -> syn::Result<Spanned<Duration>> {
    let lit: LitStr = meta.value()?.parse()?;
    let value = velocity_policy_lang::units::parse_duration(&lit.value())
        .map_err(|message| syn::Error::new(lit.span(), message))?;
    Ok(Spanned {
        value,
        span: lit.span(),
    })
}

fn count(meta: &ParseNestedMeta<'_>) -> syn::Result<Spanned<u32>> {
    let lit: LitInt = meta.value()?.parse()?;
    let value = lit
        .base10_parse::<u32>()
        .map_err(|_| syn::Error::new(lit.span(), "expected a whole number from 0 to 4294967295"))?;
    Ok(Spanned {
        value,
        span: lit.span(),
    })
}

fn ratio(meta: &ParseNestedMeta<'_>) -> syn::Result<Spanned<f64>> {
    let input = meta.value()?;
    let (value, span) = if input.peek(LitFloat) {
        let lit: LitFloat = input.parse()?;
        (lit.base10_parse::<f64>()?, lit.span())
    } else {
        let lit: LitInt = input.parse()?;
        (lit.base10_parse::<f64>()?, lit.span())
    };
    Ok(Spanned { value, span })
}

fn name(meta: &ParseNestedMeta<'_>) -> syn::Result<Spanned<String>> {
    let lit: LitStr = meta.value()?.parse()?;
    Ok(Spanned {
        value: lit.value(),
        span: lit.span(),
    })
}

/// Reads the value of `setting` as its unit says (`"5s"`, `4`, `0.5`) into `written`, unless
/// it was set already, which is an error at the key.
fn table_setting<C>(
    meta: &ParseNestedMeta<'_>,
    setting: &Setting<C>,
    written: &mut Written,
    errors: &mut Errors,
) -> syn::Result<()> {
    let key_span = meta.path.span();
    let value = match setting.unit() {
        Unit::Duration => {
            let d = duration(meta)?;
            Spanned {
                value: Number::Duration(d.value),
                span: d.span,
            }
        }
        Unit::Count => {
            let n = count(meta)?;
            Spanned {
                value: Number::Count(n.value),
                span: n.span,
            }
        }
        Unit::Share => {
            let r = ratio(meta)?;
            Spanned {
                value: Number::Share(r.value),
                span: r.span,
            }
        }
    };
    if written.iter().any(|(key, _)| *key == setting.key) {
        errors.at(
            key_span,
            format!("`{}` is set twice: keep one", setting.key),
        );
    } else {
        written.push((setting.key, value));
    }
    Ok(())
}

/// Skips whatever follows an unknown key (`= value` or `(...)`), so parsing can go on.
fn skip_value(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(Token![=]) {
        let _: syn::Expr = meta.value()?.parse()?;
    } else if meta.input.peek(syn::token::Paren) {
        let _group: proc_macro2::Group = meta.input.parse()?;
    }
    Ok(())
}

/// Runs `each` on every nested `key = value` of `meta`, collecting errors.
fn nested(
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
    mut each: impl FnMut(&ParseNestedMeta<'_>, &str, &mut Errors) -> syn::Result<bool>,
) -> syn::Result<()> {
    meta.parse_nested_meta(|inner| {
        let key = inner
            .path
            .get_ident()
            .map(ToString::to_string)
            .unwrap_or_default();
        match each(&inner, &key, errors) {
            Ok(true) => Ok(()),
            Ok(false) => {
                skip_value(&inner)?;
                Ok(())
            }
            Err(error) => {
                errors.push(error);
                skip_value(&inner).or(Ok(()))
            }
        }
    })
}

fn inline_breaker(meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<InlineBreaker> {
    const TABLE: &[Setting<BreakerConfig>] = BreakerConfig::SETTINGS;
    let known = Setting::keys_between(
        &[
            "failures",
            "ratio",
            "min_calls",
            "within",
            "cooldown",
            "quorum",
            "trips_only",
        ],
        TABLE,
        &[],
    );
    let mut b = InlineBreaker::default();
    nested(meta, errors, |inner, key, errors| {
        let span = inner.path.span();
        match key {
            "failures" => set_once(&mut b.failures, count(inner)?, span, key, errors),
            "ratio" => set_once(&mut b.ratio, ratio(inner)?, span, key, errors),
            "min_calls" => set_once(&mut b.min_calls, count(inner)?, span, key, errors),
            "within" => set_once(&mut b.within, duration(inner)?, span, key, errors),
            "cooldown" => set_once(&mut b.cooldown, duration(inner)?, span, key, errors),
            "quorum" => set_once(&mut b.quorum, count(inner)?, span, key, errors),
            "trips_only" => b.trips_only = Some(span),
            _ => match Setting::find(TABLE, key) {
                Some(setting) => table_setting(inner, setting, &mut b.settings, errors)?,
                None => {
                    errors.at(
                        span,
                        format!("unknown breaker key `{key}`: {}", suggestion(key, &known)),
                    );
                    return Ok(false);
                }
            },
        }
        Ok(true)
    })?;
    Ok(b)
}

fn inline_bulkhead(meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<InlineBulkhead> {
    const TABLE: &[Setting<BulkheadConfig>] = BulkheadConfig::SETTINGS;
    let known = Setting::keys_between(&["max_concurrent"], TABLE, &["adaptive"]);
    let mut b = InlineBulkhead::default();
    nested(meta, errors, |inner, key, errors| {
        let span = inner.path.span();
        match key {
            "max_concurrent" => set_once(&mut b.max_concurrent, count(inner)?, span, key, errors),
            "adaptive" => {
                let value = inline_adaptive(inner, errors)?;
                set_once(&mut b.adaptive, Spanned { value, span }, span, key, errors);
            }
            _ => match Setting::find(TABLE, key) {
                Some(setting) => table_setting(inner, setting, &mut b.settings, errors)?,
                None => {
                    errors.at(
                        span,
                        format!("unknown bulkhead key `{key}`: {}", suggestion(key, &known)),
                    );
                    return Ok(false);
                }
            },
        }
        Ok(true)
    })?;
    Ok(b)
}

fn inline_adaptive(meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<InlineAdaptive> {
    const KEYS: &[&str] = &["min", "max"];
    let mut a = InlineAdaptive::default();
    nested(meta, errors, |inner, key, errors| {
        let span = inner.path.span();
        match key {
            "min" => set_once(&mut a.min, count(inner)?, span, key, errors),
            "max" => set_once(&mut a.max, count(inner)?, span, key, errors),
            _ => {
                errors.at(
                    span,
                    format!("unknown adaptive key `{key}`: {}", suggestion(key, KEYS)),
                );
                return Ok(false);
            }
        }
        Ok(true)
    })?;
    Ok(a)
}

fn inline_retry(meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<InlineRetry> {
    const TABLE: &[Setting<RetryConfig>] = RetryConfig::SETTINGS;
    let known = Setting::keys_between(&["attempts", "base", "cap"], TABLE, &[]);
    let mut r = InlineRetry::default();
    nested(meta, errors, |inner, key, errors| {
        let span = inner.path.span();
        match key {
            "attempts" => set_once(&mut r.attempts, count(inner)?, span, key, errors),
            "base" => set_once(&mut r.base, duration(inner)?, span, key, errors),
            "cap" => set_once(&mut r.cap, duration(inner)?, span, key, errors),
            _ => match Setting::find(TABLE, key) {
                Some(setting) => table_setting(inner, setting, &mut r.settings, errors)?,
                None => {
                    errors.at(
                        span,
                        format!("unknown retry key `{key}`: {}", suggestion(key, &known)),
                    );
                    return Ok(false);
                }
            },
        }
        Ok(true)
    })?;
    Ok(r)
}

/// `"p95"` (a percentile of the operation's own latency, 1 to 99) or a duration, `"50ms"`.
fn hedge_after(
    meta: &ParseNestedMeta<'_>,
) -> syn::Result<Spanned<velocity_policy_lang::HedgeDelay>> {
    let lit: LitStr = meta.value()?.parse()?;
    let text = lit.value();
    let value = match text.strip_prefix('p') {
        Some(digits) => match digits.parse::<u32>() {
            Ok(p) if (1..=99).contains(&p) => {
                velocity_policy_lang::HedgeDelay::Percentile(f64::from(p))
            }
            _ => {
                return Err(syn::Error::new(
                    lit.span(),
                    format!(
                        "`{text}` is not a percentile: write one from `\"p1\"` to `\"p99\"` (`after = \"p95\"`), or a duration (`after = \"50ms\"`)"
                    ),
                ));
            }
        },
        None => velocity_policy_lang::HedgeDelay::After(
            velocity_policy_lang::units::parse_duration(&text)
                .map_err(|message| syn::Error::new(lit.span(), message))?,
        ),
    };
    Ok(Spanned {
        value,
        span: lit.span(),
    })
}

fn inline_hedge(meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<InlineHedge> {
    const TABLE: &[Setting<HedgeConfig>] = HedgeConfig::SETTINGS;
    let known = Setting::keys_between(&["after"], TABLE, &[]);
    let mut h = InlineHedge::default();
    nested(meta, errors, |inner, key, errors| {
        let span = inner.path.span();
        match key {
            "after" => set_once(&mut h.after, hedge_after(inner)?, span, key, errors),
            _ => match Setting::find(TABLE, key) {
                Some(setting) => table_setting(inner, setting, &mut h.settings, errors)?,
                None => {
                    errors.at(
                        span,
                        format!("unknown hedge key `{key}`: {}", suggestion(key, &known)),
                    );
                    return Ok(false);
                }
            },
        }
        Ok(true)
    })?;
    Ok(h)
}

/// A named reference (`breaker = "search"`) or an inline definition (`breaker(...)`).
fn reference<I>(
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
    inline: impl FnOnce(&ParseNestedMeta<'_>, &mut Errors) -> syn::Result<I>,
) -> syn::Result<Ref<I>> {
    if meta.input.peek(Token![=]) {
        Ok(Ref::Named(name(meta)?))
    } else {
        let span = meta.path.span();
        Ok(Ref::Inline(inline(meta, errors)?, span))
    }
}

fn set_ref<I>(
    slot: &mut Option<Ref<I>>,
    value: Ref<I>,
    span: Span,
    key: &str,
    errors: &mut Errors,
) {
    if slot.is_some() {
        errors.at(span, format!("`{key}` is set twice: keep one"));
    } else {
        *slot = Some(value);
    }
}

impl Args {
    /// Reads one attribute's arguments into `self`.
    pub(crate) fn add(
        &mut self,
        kind: AttrKind,
        attr_span: Span,
        tokens: TokenStream,
        errors: &mut Errors,
    ) {
        match kind {
            AttrKind::Critical | AttrKind::Deferred | AttrKind::Background => {
                let class = kind
                    .class()
                    .unwrap_or(velocity_policy_lang::WorkClass::Critical);
                match &self.class {
                    Some((_, first, _)) => errors.at(
                        attr_span,
                        format!(
                            "`#[{}]` and `#[{}]` on one function: work has one class; keep the one that says when it runs (critical: before the response; deferred: after it; background: on the background pool)",
                            first.name(),
                            kind.name()
                        ),
                    ),
                    None => self.class = Some((class, kind, attr_span)),
                }
            }
            AttrKind::Isolate => {
                if self.isolate.is_some() {
                    errors.at(attr_span, "`#[isolate]` is set twice: merge the two");
                }
                self.isolate = Some(attr_span);
            }
            AttrKind::Resilient => {
                if self.resilient.is_some() {
                    errors.at(attr_span, "`#[resilient]` is set twice: merge the two");
                }
                self.resilient = Some(attr_span);
            }
            AttrKind::Idempotent => {
                if !tokens.is_empty() {
                    errors.at(
                        tokens.span(),
                        "`#[idempotent]` takes no arguments: it declares that running the function twice is safe",
                    );
                }
                if self.idempotent.is_some() {
                    errors.at(attr_span, "`#[idempotent]` is set twice: keep one");
                }
                self.idempotent = Some(attr_span);
                return;
            }
            AttrKind::Operation => {
                match syn::parse2::<LitStr>(tokens) {
                    Ok(lit) => {
                        if self.operation.is_some() {
                            errors.at(lit.span(), "`#[operation]` is set twice: keep one");
                        }
                        self.operation = Some(Spanned {
                            value: lit.value(),
                            span: lit.span(),
                        });
                    }
                    Err(_) => errors.at(
                        attr_span,
                        "expected the operation's name as a string: `#[velocity_policy::operation(\"charge_card\")]`",
                    ),
                }
                return;
            }
        }
        let keys = kind.keys();
        let parser = syn::meta::parser(|meta| {
            let key = meta
                .path
                .get_ident()
                .map(ToString::to_string)
                .unwrap_or_else(|| quote::quote!(meta.path).to_string());
            let span = meta.path.span();
            let result = (|| -> syn::Result<()> {
                if !keys.contains(&key.as_str()) {
                    let hint = suggestion(&key, &keys);
                    errors.at(
                        span,
                        format!("unknown key `{key}` for `#[{}]`: {hint}", kind.name()),
                    );
                    return skip_value(&meta);
                }
                match key.as_str() {
                    "deadline" => {
                        set_once(&mut self.deadline, duration(&meta)?, span, &key, errors)
                    }
                    "min_budget" => {
                        set_once(&mut self.min_budget, duration(&meta)?, span, &key, errors);
                    }
                    "expected_cost" => {
                        set_once(
                            &mut self.expected_cost,
                            duration(&meta)?,
                            span,
                            &key,
                            errors,
                        );
                    }
                    "shed_at" => set_once(&mut self.shed_at, ratio(&meta)?, span, &key, errors),
                    "fallback" => set_once(&mut self.fallback, name(&meta)?, span, &key, errors),
                    "fallback_on_failure" => {
                        if self.fallback_on_failure.is_some() {
                            errors.at(span, "`fallback_on_failure` is set twice: keep one");
                        }
                        self.fallback_on_failure = Some(span);
                    }
                    "stale_if_error" => {
                        set_once(
                            &mut self.stale_if_error,
                            duration(&meta)?,
                            span,
                            &key,
                            errors,
                        );
                    }
                    "poll_budget" => {
                        set_once(&mut self.poll_budget, duration(&meta)?, span, &key, errors);
                    }
                    "queue" => set_once(&mut self.queue, name(&meta)?, span, &key, errors),
                    "max_concurrent" => {
                        set_once(&mut self.max_concurrent, count(&meta)?, span, &key, errors);
                    }
                    "max_queued" => {
                        set_once(&mut self.max_queued, count(&meta)?, span, &key, errors);
                    }
                    "pool" => {
                        let pool = name(&meta)?;
                        if pool.value != "blocking" && pool.value != "rayon" {
                            errors.at(
                                pool.span,
                                format!(
                                    "unknown pool `{}`: use `blocking` (tokio's blocking threads) or `rayon` (a dedicated pool, feature `rayon`)",
                                    pool.value
                                ),
                            );
                        }
                        set_once(&mut self.pool, pool, span, &key, errors);
                    }
                    "durable" => {
                        if self.durable.is_some() {
                            errors.at(span, "`durable` is set twice: keep one");
                        }
                        self.durable = Some(span);
                    }
                    "ratelimit" => {
                        if !meta.input.peek(Token![=]) {
                            errors.at(
                                span,
                                "a rate limit is named, not written inline: `ratelimit = \"signups\"`, declared in the policy files as `ratelimit signups { 100 per 1m; on_timeout = open; on_error = closed }`",
                            );
                            return skip_value(&meta);
                        }
                        set_once(&mut self.ratelimit, name(&meta)?, span, &key, errors);
                    }
                    "chaos" => {
                        if !meta.input.peek(Token![=]) {
                            errors.at(
                                span,
                                "a chaos drill is named, not written inline: `chaos = \"search_drill\"`, declared in the policy files as `chaos search_drill { latency = 300ms at 10%; error at 5% }`",
                            );
                            return skip_value(&meta);
                        }
                        set_once(&mut self.chaos, name(&meta)?, span, &key, errors);
                    }
                    "breaker" => {
                        let r = reference(&meta, errors, inline_breaker)?;
                        set_ref(&mut self.breaker, r, span, &key, errors);
                    }
                    "bulkhead" => {
                        let r = reference(&meta, errors, inline_bulkhead)?;
                        set_ref(&mut self.bulkhead, r, span, &key, errors);
                    }
                    "retry" => {
                        let r = reference(&meta, errors, inline_retry)?;
                        set_ref(&mut self.retry, r, span, &key, errors);
                    }
                    "hedge" => {
                        let r = reference(&meta, errors, inline_hedge)?;
                        set_ref(&mut self.hedge, r, span, &key, errors);
                    }
                    _ => {}
                }
                Ok(())
            })();
            if let Err(error) = result {
                errors.push(error);
                let _ = skip_value(&meta);
            }
            Ok(())
        });
        if let Err(error) = syn::parse::Parser::parse2(parser, tokens) {
            errors.push(error);
        }
    }
}

/// The arguments of the attribute that expands (`kind`, `tokens`) and of every sibling policy
/// attribute, taken off the function: they are expanded here, once.
pub(crate) fn parse(
    kind: AttrKind,
    tokens: TokenStream,
    func: &mut crate::func::Func,
    errors: &mut Errors,
) -> Args {
    let mut args = Args::default();
    args.add(kind, Span::call_site(), tokens, errors);
    for (sibling, attr) in take_policy_attrs(&mut func.item.attrs) {
        match attr_tokens(&attr) {
            Ok(tokens) => args.add(sibling, attr.path().span(), tokens, errors),
            Err(error) => errors.push(error),
        }
    }
    args
}

impl Args {
    /// Whether the attributes declare work to expand: a class, resilience, an operation or
    /// isolation (`#[idempotent]` alone only declares).
    pub(crate) fn declares_work(&self) -> bool {
        self.class.is_some()
            || self.resilient.is_some()
            || self.operation.is_some()
            || self.isolate.is_some()
    }
}

/// Takes every policy attribute off `attrs` (they are expanded here, once) and returns them
/// with their kinds, in the order written.
fn take_policy_attrs(attrs: &mut Vec<Attribute>) -> Vec<(AttrKind, Attribute)> {
    let mut taken = Vec::new();
    attrs.retain(|attr| match AttrKind::from_path(attr.path()) {
        Some(kind) => {
            taken.push((kind, attr.clone()));
            false
        }
        None => true,
    });
    taken
}

/// The arguments of a sibling attribute, as tokens.
fn attr_tokens(attr: &Attribute) -> Result<TokenStream, syn::Error> {
    match &attr.meta {
        syn::Meta::Path(_) => Ok(TokenStream::new()),
        syn::Meta::List(list) => Ok(list.tokens.clone()),
        syn::Meta::NameValue(nv) => Err(syn::Error::new(
            nv.eq_token.span,
            "policy attributes take their arguments in parentheses: `#[velocity_policy::critical(deadline = \"3s\")]`",
        )),
    }
}
