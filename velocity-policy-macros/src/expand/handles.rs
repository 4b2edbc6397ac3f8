//! Step 1: the mechanisms' handles, each a `static` registered in the global registry the first
//! time it is used, in one block of their own:
//!
//! ```text
//! let (breaker, bulkhead) = {
//!     use ::core::time::Duration;
//!     use ::velocity_policy::__private0::Handle;
//!     const BY: &str = concat!(module_path!(), "::", "push_to_index");
//!     use ::velocity_policy::__private0::config;
//!     static BREAKER: Handle<::velocity_policy::__private0::Breaker> =
//!         Handle::breaker("search", BY, config::BreakerConfig::new(..).with_sharing(..));
//!     static BULKHEAD: Handle<::velocity_policy::__private0::Bulkhead> =
//!         Handle::bulkhead("search", BY, config::BulkheadConfig::new(4).with_max_queued(0));
//!     (&*BREAKER, &*BULKHEAD)
//! };
//! ```
//!
//! Each mechanism keeps its own static, name and settings (plain data: the mechanism's
//! configuration from `velocity-policy-model`, built in a `const` context and handed to the mechanism's
//! own builder when it is registered); the block only scopes them, and its `use`s,
//! away from the user's code. No user token goes inside it. `BY` names the function,
//! so a second, different configuration of one name is refused naming both functions (the
//! registry's "one name, one configuration").

use std::time::Duration;

use proc_macro2::{Ident, Literal, Span, TokenStream, TokenTree};
use quote::{ToTokens as _, quote};
use velocity_policy_lang::{
    AllowanceConfig, BreakerSpec, BulkheadSpec, FailMode, HedgeDelay, HedgeSpec, MechanismSpec,
    Number, OpenAfter, RatelimitSpec, RetrySpec, Sharing, WorkClass,
};

use super::{local, operation_name};
use crate::facade::private;
use crate::valid::Plan;

/// The handles an expansion uses, by their local names.
#[derive(Default)]
pub(super) struct Handles {
    statics: Vec<(Ident, Ident, TokenStream)>,
    pub(super) breaker: Option<Ident>,
    pub(super) bulkhead: Option<Ident>,
    pub(super) retry: Option<Ident>,
    pub(super) hedge: Option<Ident>,
    pub(super) ratelimit: Option<Ident>,
    /// The chaos drill each attempt draws from (feature `chaos`).
    pub(super) chaos: Option<Ident>,
    pub(super) shedder: Option<Ident>,
    pub(super) monitor: Option<Ident>,
    pub(super) fallback: Option<Ident>,
    pub(super) pool: Option<Ident>,
    /// The operation's deadline and minimum budget, which an override may change.
    pub(super) operation: Option<Ident>,
}

/// A duration inside the block, where `Duration` is `::core::time::Duration`.
fn duration(d: Duration) -> TokenStream {
    let exact = super::exact_unit(d);
    quote!(Duration::#exact)
}

/// Whether `tokens` name `ident` (`Duration`, `config`: an identifier, while a mechanism's name
/// is a string literal).
fn mentions(tokens: TokenStream, ident: &str) -> bool {
    tokens.into_iter().any(|token| match token {
        TokenTree::Ident(found) => found == ident,
        TokenTree::Group(group) => mentions(group.stream(), ident),
        _ => false,
    })
}

fn count(n: u32) -> Literal {
    Literal::u32_unsuffixed(n)
}

fn ratio(r: f64) -> Literal {
    Literal::f64_unsuffixed(r)
}

/// `.with_probation(Duration::from_secs(5))`: the builder of each setting of the mechanism's
/// table that was written, in the table's order (one not written keeps its default).
fn written<S: MechanismSpec>(spec: &S) -> TokenStream {
    S::SETTINGS
        .iter()
        .filter_map(|setting| {
            let value = match spec.setting(setting.key)?.value {
                Number::Duration(d) => duration(d),
                Number::Count(n) => count(n).into_token_stream(),
                Number::Share(share) => ratio(share).into_token_stream(),
            };
            let builder = Ident::new(setting.builder, Span::call_site());
            Some(quote!(.#builder(#value)))
        })
        .collect()
}

/// The registry name of a named mechanism: its name in the files, or for an inline one, a name
/// made unique by the module path.
fn runtime_name(name: &str, inline: bool) -> TokenStream {
    if inline {
        operation_name(name)
    } else {
        quote!(#name)
    }
}

fn breaker(spec: &BreakerSpec, inline: bool) -> TokenStream {
    let name = runtime_name(&spec.name.value, inline);
    let config = &spec.config;
    let open_after = match config.open_after {
        OpenAfter::Failures { count: n, window } => {
            let (n, window) = (count(n), duration(window));
            quote!(config::OpenAfter::failures(#n, #window))
        }
        OpenAfter::FailureRatio {
            ratio: share,
            min_calls,
            window,
        } => {
            let (share, min_calls, window) = (ratio(share), count(min_calls), duration(window));
            quote!(config::OpenAfter::ratio(#share, #min_calls, #window))
        }
        _ => quote!(config::BreakerConfig::DEFAULT.open_after),
    };
    let cooldown = duration(config.cooldown);
    let sharing = match config.sharing {
        Sharing::Openings { quorum } => {
            let quorum = count(quorum);
            quote!(.with_sharing(config::Sharing::Openings { quorum: #quorum }))
        }
        Sharing::TripsOnly => quote!(.with_sharing(config::Sharing::TripsOnly)),
        _ => quote!(),
    };
    let settings = written(spec);
    quote! {
        Handle<#private::Breaker> = Handle::breaker(#name, BY, config::BreakerConfig::new(#open_after, #cooldown) #sharing #settings)
    }
}

fn bulkhead(spec: &BulkheadSpec, inline: bool) -> TokenStream {
    let name = runtime_name(&spec.name.value, inline);
    let config = &spec.config;
    let slots = match config.adaptive {
        Some(limit) => {
            let (min, max) = (count(limit.min), count(limit.max));
            quote!(config::BulkheadConfig::adaptive(config::AdaptiveLimit::new(#min, #max)))
        }
        None => {
            let max_concurrent = count(config.max_concurrent);
            quote!(config::BulkheadConfig::new(#max_concurrent))
        }
    };
    let settings = written(spec);
    quote! {
        Handle<#private::Bulkhead> = Handle::bulkhead(#name, BY, #slots #settings)
    }
}

/// `config::AllowanceConfig::new(0.2, 10)`: the language does not set its window.
fn allowance(allowance: AllowanceConfig) -> TokenStream {
    let (share, floor) = (ratio(allowance.ratio), count(allowance.floor_per_second));
    quote!(config::AllowanceConfig::new(#share, #floor))
}

fn retry(spec: &RetrySpec, inline: bool) -> TokenStream {
    let name = runtime_name(&spec.name.value, inline);
    let config = &spec.config;
    let attempts = count(config.attempts);
    let (base, cap) = (
        duration(config.backoff.base()),
        duration(config.backoff.cap()),
    );
    let settings = written(spec);
    let allowance = config.allowance.map(|a| {
        let a = allowance(a);
        quote!(.with_allowance(#a))
    });
    quote! {
        Handle<#private::RetryPolicy> = Handle::retry(#name, BY, config::RetryConfig::new(#attempts).with_backoff(config::Backoff::full_jitter(#base, #cap)) #settings #allowance)
    }
}

fn hedge(spec: &HedgeSpec, inline: bool) -> TokenStream {
    let name = runtime_name(&spec.name.value, inline);
    let config = &spec.config;
    let after = match config.after {
        HedgeDelay::After(d) => {
            let d = duration(d);
            quote!(config::HedgeDelay::After(#d))
        }
        HedgeDelay::Percentile(p) => {
            let p = Literal::f64_unsuffixed(p);
            quote!(config::HedgeDelay::Percentile(#p))
        }
    };
    let settings = written(spec);
    let allowance = config.allowance.map(|a| {
        let a = allowance(a);
        quote!(.with_allowance(#a))
    });
    quote! {
        Handle<#private::hedge::Hedge> = Handle::hedge(#name, BY, config::HedgeConfig::new(#after) #settings #allowance)
    }
}

fn fail_mode(mode: FailMode) -> TokenStream {
    match mode {
        FailMode::Open => quote!(config::FailMode::Open),
        FailMode::Closed => quote!(config::FailMode::Closed),
        FailMode::Local => quote!(config::FailMode::Local),
    }
}

/// `config::RateLimitConfig::new(100, ..).with_on_timeout(..)`: the settings that were
/// written (a fail mode written as the default is still emitted, as written).
fn ratelimit(spec: &RatelimitSpec) -> TokenStream {
    let name = &spec.name.value;
    let config = &spec.config;
    let (limit, per) = (count(config.limit), duration(config.per));
    let on_timeout = spec.on_timeout().map(|mode| {
        let mode = fail_mode(mode.value);
        quote!(.with_on_timeout(#mode))
    });
    let on_error = spec.on_error().map(|mode| {
        let mode = fail_mode(mode.value);
        quote!(.with_on_error(#mode))
    });
    let local_rate = spec.local_rate().map(|local| {
        let (limit, per) = (count(local.value.count), duration(local.value.per));
        quote!(.with_local_rate(#limit, #per))
    });
    quote! {
        Handle<#private::RateLimit> = Handle::ratelimit(#name, BY, config::RateLimitConfig::new(#limit, #per) #on_timeout #on_error #local_rate)
    }
}

fn chaos(spec: &velocity_policy_lang::ChaosSpec) -> TokenStream {
    use velocity_policy_lang::{ChaosFaultKind, ChaosLatency};
    let name = &spec.name.value;
    let faults = spec.faults.iter().map(|fault| {
        let rate = ratio(fault.rate.value);
        match fault.kind {
            ChaosFaultKind::Latency(ChaosLatency::Fixed(d)) => {
                let d = duration(d);
                quote!(.latency_fixed(#d, #rate))
            }
            ChaosFaultKind::Latency(ChaosLatency::Uniform { min, max }) => {
                let (min, max) = (duration(min), duration(max));
                quote!(.latency_uniform(#min, #max, #rate))
            }
            ChaosFaultKind::Latency(ChaosLatency::LogNormal { p50, p99 }) => {
                let (p50, p99) = (duration(p50), duration(p99));
                quote!(.latency_lognormal(#p50, #p99, #rate))
            }
            ChaosFaultKind::Error => quote!(.error(#rate)),
            ChaosFaultKind::Refuse => quote!(.refuse(#rate)),
            ChaosFaultKind::TooManyRequests { retry_after } => {
                let after = duration(retry_after);
                quote!(.too_many_requests(#after, #rate))
            }
            _ => quote!(),
        }
    });
    let during = spec.during.as_ref().map(|during| {
        let (from, until) = (duration(during.value.0), duration(during.value.1));
        quote!(.during(#from, #until))
    });
    let instances = spec.instances.as_ref().map(|share| {
        let share = ratio(share.value);
        quote!(.instances(#share))
    });
    let enabled = spec
        .enabled
        .as_ref()
        .filter(|on| !on.value)
        .map(|_| quote!(.enabled(false)));
    quote! {
        Handle<#private::Chaos> = Handle::chaos(#name, BY) #(#faults)* #during #instances #enabled
    }
}

fn shedder(plan: &Plan) -> TokenStream {
    let name = operation_name(&plan.op);
    let (mut deferred, mut background) = plan.thresholds;
    if let Some(shed_at) = plan.shed_at {
        match plan.class {
            WorkClass::Deferred => deferred = shed_at,
            WorkClass::Background => background = shed_at,
            WorkClass::Critical => {}
        }
    }
    let (deferred, background) = (ratio(deferred), ratio(background));
    quote! {
        Handle<#private::Shedder> = Handle::shedder(#name, BY, config::SheddingConfig::new(#deferred, #background))
    }
}

impl Handles {
    /// The mechanisms the plan names: breaker, bulkhead, retry policy, hedge, rate limiter, shedder
    /// and poll monitor.
    pub(super) fn of(plan: &Plan) -> Self {
        let mut h = Self::default();
        if let Some(spec) = &plan.breaker {
            h.breaker = Some(h.add("breaker", breaker(spec, plan.inline.breaker)));
        }
        if let Some(spec) = &plan.bulkhead {
            h.bulkhead = Some(h.add("bulkhead", bulkhead(spec, plan.inline.bulkhead)));
        }
        if let Some(spec) = &plan.retry {
            h.retry = Some(h.add("retry", retry(spec, plan.inline.retry)));
        }
        if let Some(spec) = &plan.hedge {
            h.hedge = Some(h.add("hedge", hedge(spec, plan.inline.hedge)));
        }
        if let Some(spec) = &plan.ratelimit {
            h.ratelimit = Some(h.add("ratelimit", ratelimit(spec)));
        }
        if let Some(spec) = &plan.chaos {
            h.chaos = Some(h.add("chaos", chaos(spec)));
        }
        // A decision to make: optional work against its compartment's load, or any work with
        // a known cost against the budget left.
        if (plan.class != WorkClass::Critical && plan.bulkhead.is_some())
            || plan.expected_cost.is_some()
        {
            h.shedder = Some(h.add("shedder", shedder(plan)));
        }
        let name = operation_name(&plan.op);
        let deadline = match plan.deadline {
            Some(deadline) => {
                let deadline = duration(deadline);
                quote!(config::DeadlineConfig::new(#deadline))
            }
            None => quote!(config::DeadlineConfig::DEFAULT),
        };
        let min_budget = plan.min_budget.filter(|min| !min.is_zero()).map(|min| {
            let min = duration(min);
            quote!(.with_min_budget(#min))
        });
        h.operation = Some(h.add(
            "operation",
            quote!(Handle<#private::deadline::OperationDeadline> = Handle::operation(#name, BY, #deadline #min_budget)),
        ));
        if let Some(budget) = plan.poll_budget {
            let (name, budget) = (operation_name(&plan.op), duration(budget));
            h.monitor = Some(h.add(
                "monitor",
                quote!(Handle<#private::isolate::PollMonitor> = Handle::poll_monitor(#name, BY).budget(#budget)),
            ));
        }
        h
    }

    /// The fallback record of the operation, answered by `answered_by`.
    pub(super) fn add_fallback(&mut self, plan: &Plan, answered_by: &str) {
        let name = operation_name(&plan.op);
        self.fallback = Some(self.add(
            "fallback",
            quote!(Handle<#private::fallback::Fallback> = Handle::fallback(#name, BY).answered_by(#answered_by)),
        ));
    }

    /// The pool of isolated work.
    pub(super) fn add_pool(&mut self, name: &str, configure: TokenStream) {
        let name = operation_name(name);
        self.pool = Some(self.add(
            "pool",
            quote!(Handle<#private::isolate::IsolatedPool> = Handle::pool(#name, BY) #configure),
        ));
    }

    /// A static named after `local` (upper case), typed and built by `definition`.
    fn add(&mut self, local_name: &str, definition: TokenStream) -> Ident {
        let ident = local(local_name);
        let upper = Ident::new(&local_name.to_uppercase(), Span::call_site());
        self.statics.push((ident.clone(), upper, definition));
        ident
    }

    /// `let (a, b) = { ..statics.. (&*A, &*B) };`, or nothing when there are no handles; the
    /// statics are declared by the operation `op`.
    pub(super) fn setup(&self, op: &str) -> TokenStream {
        let locals: Vec<&Ident> = self.statics.iter().map(|(local, ..)| local).collect();
        let statics: Vec<&Ident> = self.statics.iter().map(|(_, upper, _)| upper).collect();
        let definitions = self
            .statics
            .iter()
            .map(|(_, upper, definition)| quote!(static #upper: #definition;));
        let uses = |ident| {
            self.statics
                .iter()
                .any(|(.., definition)| mentions(definition.clone(), ident))
        };
        let duration = uses("Duration").then(|| {
            quote!(
                use ::core::time::Duration;
            )
        });
        // The mechanisms' settings, one plain value each (`config::BreakerConfig::new(..)`).
        let config = uses("config").then(|| {
            quote!(
                use #private::config;
            )
        });
        let declared_by = operation_name(op);
        let (pattern, value) = match (locals.as_slice(), statics.as_slice()) {
            ([], _) => return TokenStream::new(),
            ([one], [upper]) => (quote!(#one), quote!(&*#upper)),
            _ => (quote!((#(#locals),*)), quote!((#(&*#statics),*))),
        };
        quote! {
            let #pattern = {
                #duration
                use #private::Handle;
                #config
                const BY: &str = #declared_by;
                #(#definitions)*
                #value
            };
        }
    }
}
