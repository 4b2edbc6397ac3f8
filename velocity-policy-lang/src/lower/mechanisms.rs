//! Lowering the resilience mechanisms: `request` (the deadline), `breaker`, `bulkhead`, `retry`,
//! `hedge`, `shedding`, `ratelimit` and `queue`.

use super::{Lowering, insert, word};
use crate::ast::{Quantity, Stanza, Term, Value};
use crate::diagnostic::{Diagnostic, Kind};
use crate::source::{Loc, Located};
use crate::spec::{
    AdaptiveSpec, AllowanceConfig, Backoff, BreakerConfig, BreakerSpec, BulkheadConfig,
    BulkheadSpec, HedgeConfig, HedgeDelay, HedgeSpec, MechanismSpec, OpenAfter, QueueSpec, Rate,
    RatelimitSpec, RequestSpec, RetryConfig, RetrySpec, Setting, Sharing, SheddingSpec,
    allowance_as_written,
};
use crate::suggest;

pub(super) fn lower_request(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    const KEYS: &[&str] = &["deadline", "min_budget"];
    lowering.unnamed(stanza);
    let body = lowering.body(stanza, KEYS);
    for phrase in &body.phrases {
        lowering.unknown_phrase(stanza, phrase, KEYS);
    }
    let mut request = RequestSpec::new(stanza.loc);
    if let Some((key, value)) = body.get("deadline") {
        request.deadline = lowering.duration(&key.text, value);
    }
    if let Some((key, value)) = body.get("min_budget") {
        request.min_budget = lowering.duration(&key.text, value);
    }
    match &lowering.spec.request {
        Some(first) => {
            let first = first.loc;
            lowering.push(
                Diagnostic::new(
                    Kind::DuplicateStanza {
                        keyword: "request".to_owned(),
                    },
                    stanza.keyword.loc,
                    "declared again here",
                )
                .with_label(first, "first declared here"),
            );
        }
        None => lowering.spec.request = Some(request),
    }
}

const OPEN_AFTER_FORMS: &str =
    "`N failures within DURATION` or `P% of at least N calls within DURATION`";

pub(super) fn lower_breaker(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    let table = BreakerConfig::SETTINGS;
    let name = lowering.named(stanza);
    let body = lowering.body(
        stanza,
        &Setting::keys_between(&["open_after", "cooldown"], table, &[]),
    );
    let mut sharing = None;
    for phrase in &body.phrases {
        match lower_sharing(lowering, phrase) {
            Some(Some(found)) => match &sharing {
                Some(Located { loc, .. }) => {
                    let first: Loc = *loc;
                    lowering.push(
                        Diagnostic::new(
                            Kind::DuplicateSetting {
                                key: "shared".to_owned(),
                            },
                            phrase.loc,
                            "set again here",
                        )
                        .with_label(first, "first set here"),
                    );
                }
                None => sharing = Some(found),
            },
            Some(None) => {}
            None => lowering.unknown_phrase(
                stanza,
                phrase,
                &Setting::keys_between(&["open_after", "cooldown", "shared"], table, &[]),
            ),
        }
    }
    let what = name.as_ref().map_or_else(
        || "breaker".to_owned(),
        |name| format!("breaker `{}`", name.value),
    );
    let open_after = match body.get("open_after") {
        Some((key, value)) => lower_open_after(lowering, &key.text, value),
        None => {
            lowering.missing(
                &body,
                &what,
                "open_after",
                "open_after = 5 failures within 30s",
            );
            None
        }
    };
    let cooldown = match body.get("cooldown") {
        Some((key, value)) => lowering.duration(&key.text, value),
        None => {
            lowering.missing(&body, &what, "cooldown", "cooldown = 20s");
            None
        }
    };
    let mut complete = true;
    let settings = lowering.table_settings(&body, table, &mut complete);
    match (name, open_after, cooldown) {
        (Some(name), Some(open_after), Some(cooldown)) if complete => {
            let mut breaker = BreakerSpec::new(name, open_after, cooldown, stanza.loc);
            if let Some(sharing) = sharing {
                breaker.set_sharing(sharing);
            }
            for (key, value) in settings {
                breaker.set_setting(key, value);
            }
            insert(
                &mut lowering.spec.breakers,
                breaker,
                &mut lowering.diagnostics,
            );
        }
        (name, ..) => lowering.drop_item("breaker", name),
    }
}

/// `shared`, `shared(quorum = N)` or `shared(trips_only)`. `None` if the phrase is not about
/// sharing at all; `Some(None)` if it is but was wrong (and reported).
fn lower_sharing(lowering: &mut Lowering<'_>, phrase: &Value) -> Option<Option<Located<Sharing>>> {
    const HELP: &str = "write `shared`, `shared(quorum = 2)` or `shared(trips_only)`";
    let call = match phrase.terms.as_slice() {
        [Term::Word(ident)] if ident.text == "shared" => {
            return Some(Some(Located::new(
                Sharing::Openings { quorum: 1 },
                ident.loc,
            )));
        }
        [Term::Call(call)] if call.name.text == "shared" => call,
        _ => return None,
    };
    let sharing = match call.args.as_slice() {
        [arg]
            if arg.key.is_none()
                && matches!(arg.value.terms.as_slice(), [term] if word(term, "trips_only")) =>
        {
            Some(Sharing::TripsOnly)
        }
        [arg] if arg.key.as_ref().is_some_and(|key| key.text == "quorum") => lowering
            .count("quorum", &arg.value)
            .map(|quorum| Sharing::Openings {
                quorum: quorum.value,
            }),
        _ => {
            lowering.invalid(
                "shared",
                "`quorum = N` or `trips_only`",
                &Term::Call(call.clone()),
                call.loc,
                HELP.to_owned(),
            );
            None
        }
    };
    Some(sharing.map(|sharing| Located::new(sharing, call.loc)))
}

fn lower_open_after(
    lowering: &mut Lowering<'_>,
    key: &str,
    value: &Value,
) -> Option<Located<OpenAfter>> {
    match value.terms.as_slice() {
        [
            Term::Quantity(failures),
            failures_word,
            within,
            Term::Quantity(window),
        ] if word(failures_word, "failures") && word(within, "within") => {
            let failures = lowering.quantity_count(key, failures);
            let window = lowering.quantity_duration(key, window);
            Some(Located::new(
                OpenAfter::Failures {
                    count: failures?.value,
                    window: window?.value,
                },
                value.loc,
            ))
        }
        [
            Term::Quantity(ratio),
            of,
            at,
            least,
            Term::Quantity(calls),
            calls_word,
            within,
            Term::Quantity(window),
        ] if word(of, "of")
            && word(at, "at")
            && word(least, "least")
            && word(calls_word, "calls")
            && word(within, "within") =>
        {
            let ratio = lowering.quantity_ratio(key, ratio);
            let min_calls = lowering.quantity_count(key, calls);
            let window = lowering.quantity_duration(key, window);
            Some(Located::new(
                OpenAfter::FailureRatio {
                    ratio: ratio?.value,
                    min_calls: min_calls?.value,
                    window: window?.value,
                },
                value.loc,
            ))
        }
        _ => {
            lowering.invalid(key, OPEN_AFTER_FORMS, value, value.loc, "for example `open_after = 5 failures within 30s` or `open_after = 50% of at least 20 calls within 30s`".to_owned());
            None
        }
    }
}

pub(super) fn lower_bulkhead(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    let table = BulkheadConfig::SETTINGS;
    let name = lowering.named(stanza);
    let body = lowering.body(
        stanza,
        &Setting::keys_between(&["max_concurrent"], table, &[]),
    );
    // `None`: not written; `Some(None)`: written wrong (and reported).
    let mut adaptive: Option<Option<AdaptiveSpec>> = None;
    for phrase in &body.phrases {
        match lower_adaptive(lowering, phrase) {
            Some(found) => match &adaptive {
                Some(first) => {
                    let first = first.as_ref().map_or(phrase.loc, |first| first.loc);
                    lowering.push(
                        Diagnostic::new(
                            Kind::DuplicateSetting {
                                key: "adaptive".to_owned(),
                            },
                            phrase.loc,
                            "set again here",
                        )
                        .with_label(first, "first set here"),
                    );
                }
                None => adaptive = Some(found),
            },
            None => lowering.unknown_phrase(
                stanza,
                phrase,
                &Setting::keys_between(&["max_concurrent"], table, &["adaptive"]),
            ),
        }
    }
    let what = name.as_ref().map_or_else(
        || "bulkhead".to_owned(),
        |name| format!("bulkhead `{}`", name.value),
    );
    let max_concurrent = match body.get("max_concurrent") {
        Some((key, value)) => Some(lowering.count(&key.text, value)),
        None if adaptive.is_some() => None,
        None => {
            lowering.missing(&body, &what, "max_concurrent", "max_concurrent = 4");
            Some(None)
        }
    };
    let mut complete = true;
    let settings = lowering.table_settings(&body, table, &mut complete);
    let slots = match (adaptive, max_concurrent) {
        (Some(Some(adaptive)), None) => Some((None, Some(adaptive))),
        // Both written: kept, so that the validator names the fix
        // (`policy::adaptive-with-fixed-limit`).
        (Some(Some(adaptive)), Some(Some(max_concurrent))) => {
            Some((Some(max_concurrent), Some(adaptive)))
        }
        (None, Some(Some(max_concurrent))) => Some((Some(max_concurrent), None)),
        _ => None,
    };
    match (name, slots) {
        (Some(name), Some((max_concurrent, adaptive))) if complete => {
            let mut bulkhead = match (max_concurrent, adaptive) {
                (max_concurrent, Some(adaptive)) => {
                    let mut bulkhead = BulkheadSpec::adaptive(name, adaptive, stanza.loc);
                    if let Some(max_concurrent) = max_concurrent {
                        bulkhead.set_max_concurrent(max_concurrent);
                    }
                    bulkhead
                }
                (Some(max_concurrent), None) => BulkheadSpec::new(name, max_concurrent, stanza.loc),
                (None, None) => return,
            };
            for (key, value) in settings {
                bulkhead.set_setting(key, value);
            }
            insert(
                &mut lowering.spec.bulkheads,
                bulkhead,
                &mut lowering.diagnostics,
            );
        }
        (name, ..) => lowering.drop_item("bulkhead", name),
    }
}

/// `adaptive(min = 4, max = 64)`. `None` if the phrase is not about adaptation at all;
/// `Some(None)` if it is but was wrong (and reported).
fn lower_adaptive(lowering: &mut Lowering<'_>, phrase: &Value) -> Option<Option<AdaptiveSpec>> {
    const HELP: &str = "write `adaptive(min = 4, max = 64)`: the slot count moves between the two, following the dependency's latency";
    let call = match phrase.terms.as_slice() {
        [Term::Call(call)] if call.name.text == "adaptive" => call,
        [Term::Word(ident)] if ident.text == "adaptive" => {
            lowering.invalid(
                "adaptive",
                "bounds like `adaptive(min = 4, max = 64)`",
                &ident.text,
                ident.loc,
                HELP.to_owned(),
            );
            return Some(None);
        }
        _ => return None,
    };
    let (mut min, mut max) = (None, None);
    let mut complete = true;
    for arg in &call.args {
        let slot = match arg.key.as_ref().map(|key| key.text.as_str()) {
            Some("min") if min.is_none() => &mut min,
            Some("max") if max.is_none() => &mut max,
            _ => {
                complete = false;
                let key_text = arg
                    .key
                    .as_ref()
                    .map_or_else(|| arg.value.to_string(), |key| key.text.clone());
                let help = suggest::did_you_mean(
                    &key_text,
                    ["min", "max"],
                    "the arguments of `adaptive`",
                    "",
                );
                lowering.push(Diagnostic::new(
                    Kind::UnknownSetting {
                        keyword: "adaptive".to_owned(),
                        key: key_text,
                        help,
                    },
                    arg.loc,
                    "unknown or repeated",
                ));
                continue;
            }
        };
        let name = arg.key.as_ref().map_or("", |key| key.text.as_str());
        *slot = lowering.count(name, &arg.value);
        complete &= slot.is_some();
    }
    if !complete {
        return Some(None);
    }
    match (min, max) {
        (Some(min), Some(max)) => Some(Some(AdaptiveSpec::new(min, max, call.loc))),
        _ => {
            lowering.invalid(
                "adaptive",
                "both `min` and `max`",
                &Term::Call(call.clone()),
                call.loc,
                HELP.to_owned(),
            );
            Some(None)
        }
    }
}

/// `queue NAME { ... }`: every setting optional (the runtime's default where absent).
pub(super) fn lower_queue(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    const KEYS: &[&str] = &[
        "max_len",
        "visibility_timeout",
        "max_deliveries",
        "task_deadline",
        "concurrency",
    ];
    let name = lowering.named(stanza);
    let body = lowering.body(stanza, KEYS);
    for phrase in &body.phrases {
        lowering.unknown_phrase(stanza, phrase, KEYS);
    }
    let mut complete = true;
    let mut count = |lowering: &mut Lowering<'_>, key: &str| {
        let (key, value) = body.get(key)?;
        let count = lowering.count(&key.text, value);
        complete &= count.is_some();
        count
    };
    let max_len = count(lowering, "max_len");
    let max_deliveries = count(lowering, "max_deliveries");
    let concurrency = count(lowering, "concurrency");
    let mut duration = |lowering: &mut Lowering<'_>, key: &str| {
        let (key, value) = body.get(key)?;
        let duration = lowering.duration(&key.text, value);
        complete &= duration.is_some();
        duration
    };
    let visibility_timeout = duration(lowering, "visibility_timeout");
    let task_deadline = duration(lowering, "task_deadline");
    match name {
        Some(name) if complete => {
            let mut queue = QueueSpec::new(name, stanza.loc);
            queue.max_len = max_len;
            queue.visibility_timeout = visibility_timeout;
            queue.max_deliveries = max_deliveries;
            queue.task_deadline = task_deadline;
            queue.concurrency = concurrency;
            insert(&mut lowering.spec.queues, queue, &mut lowering.diagnostics);
        }
        name => lowering.drop_item("queue", name),
    }
}

pub(super) fn lower_retry(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    let table = RetryConfig::SETTINGS;
    let known = Setting::keys_between(&["attempts", "backoff"], table, &["allowance"]);
    let name = lowering.named(stanza);
    let body = lowering.body(stanza, &known);
    for phrase in &body.phrases {
        lowering.unknown_phrase(stanza, phrase, &known);
    }
    let what = name.as_ref().map_or_else(
        || "retry".to_owned(),
        |name| format!("retry `{}`", name.value),
    );
    let attempts = match body.get("attempts") {
        Some((key, value)) => lowering.count(&key.text, value),
        None => {
            lowering.missing(&body, &what, "attempts", "attempts = 3");
            None
        }
    };
    let backoff = match body.get("backoff") {
        Some((key, value)) => lower_backoff(lowering, &key.text, value),
        None => {
            lowering.missing(
                &body,
                &what,
                "backoff",
                "backoff = full_jitter(base = 50ms, cap = 1s)",
            );
            None
        }
    };
    let mut complete = true;
    let settings = lowering.table_settings(&body, table, &mut complete);
    let allowance = body
        .get("allowance")
        .map(|(key, value)| lower_allowance(lowering, &key.text, value));
    match (name, attempts, backoff, allowance) {
        (Some(name), Some(attempts), Some(backoff), allowance @ (None | Some(Some(_))))
            if complete =>
        {
            let mut retry = RetrySpec::new(name, attempts, backoff, stanza.loc);
            for (key, value) in settings {
                retry.set_setting(key, value);
            }
            if let Some(allowance) = allowance.flatten() {
                retry.set_allowance(allowance);
            }
            insert(&mut lowering.spec.retries, retry, &mut lowering.diagnostics);
        }
        (name, ..) => lowering.drop_item("retry", name),
    }
}

pub(super) fn lower_hedge(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    let table = HedgeConfig::SETTINGS;
    let known = Setting::keys_between(&["after"], table, &["allowance"]);
    let name = lowering.named(stanza);
    let body = lowering.body(stanza, &known);
    for phrase in &body.phrases {
        lowering.unknown_phrase(stanza, phrase, &known);
    }
    let what = name.as_ref().map_or_else(
        || "hedge".to_owned(),
        |name| format!("hedge `{}`", name.value),
    );
    let after = match body.get("after") {
        Some((key, value)) => lower_hedge_after(lowering, &key.text, value),
        None => {
            lowering.missing(&body, &what, "after", "after = p95");
            None
        }
    };
    let mut complete = true;
    let settings = lowering.table_settings(&body, table, &mut complete);
    let allowance = body
        .get("allowance")
        .map(|(key, value)| lower_allowance(lowering, &key.text, value));
    match (name, after, allowance) {
        (Some(name), Some(after), allowance @ (None | Some(Some(_)))) if complete => {
            let mut hedge = HedgeSpec::new(name, after, stanza.loc);
            for (key, value) in settings {
                hedge.set_setting(key, value);
            }
            if let Some(allowance) = allowance.flatten() {
                hedge.set_allowance(allowance);
            }
            insert(&mut lowering.spec.hedges, hedge, &mut lowering.diagnostics);
        }
        (name, ..) => lowering.drop_item("hedge", name),
    }
}

/// `p95` (a percentile of the operation's own latency, 1 to 99) or a duration.
fn lower_hedge_after(
    lowering: &mut Lowering<'_>,
    key: &str,
    value: &Value,
) -> Option<Located<HedgeDelay>> {
    const EXPECTED: &str = "a percentile like `p95` or a duration like `50ms`";
    match value.terms.as_slice() {
        [Term::Word(word)] => {
            let percentile = word
                .text
                .strip_prefix('p')
                .and_then(|digits| digits.parse::<u32>().ok())
                .filter(|p| (1..=99).contains(p));
            match percentile {
                Some(p) => Some(Located::new(HedgeDelay::Percentile(f64::from(p)), word.loc)),
                None => {
                    lowering.invalid(
                        key,
                        EXPECTED,
                        value,
                        value.loc,
                        "write a percentile from `p1` to `p99` (`after = p95`), or a duration (`after = 50ms`)"
                            .to_owned(),
                    );
                    None
                }
            }
        }
        [Term::Quantity(quantity)] => lowering
            .quantity_duration(key, quantity)
            .map(|d| Located::new(HedgeDelay::After(d.value), d.loc)),
        _ => {
            lowering.invalid(
                key,
                EXPECTED,
                value,
                value.loc,
                "write `after = p95` or `after = 50ms`".to_owned(),
            );
            None
        }
    }
}

fn lower_backoff(
    lowering: &mut Lowering<'_>,
    key: &str,
    value: &Value,
) -> Option<Located<Backoff>> {
    const EXAMPLE: &str = "full_jitter(base = 50ms, cap = 1s)";
    let call = match value.terms.as_slice() {
        [Term::Call(call)] if call.name.text == "full_jitter" => call,
        _ => {
            let help = match value.terms.as_slice() {
                [Term::Call(call)] => match suggest::closest(&call.name.text, ["full_jitter"]) {
                    Some(name) => {
                        format!("did you mean `{name}`? backoff always carries full jitter")
                    }
                    None => format!("backoff always carries full jitter: `{key} = {EXAMPLE}`"),
                },
                _ => format!("backoff always carries full jitter: `{key} = {EXAMPLE}`"),
            };
            lowering.invalid(key, &format!("`{EXAMPLE}`"), value, value.loc, help);
            return None;
        }
    };
    let (mut base, mut cap) = (None, None);
    let mut complete = true;
    for arg in &call.args {
        match arg.key.as_ref().map(|key| key.text.as_str()) {
            Some("base") if base.is_none() => base = lowering.duration("base", &arg.value),
            Some("cap") if cap.is_none() => cap = lowering.duration("cap", &arg.value),
            _ => {
                complete = false;
                let key_text = arg
                    .key
                    .as_ref()
                    .map_or_else(|| arg.value.to_string(), |key| key.text.clone());
                let help = suggest::did_you_mean(
                    &key_text,
                    ["base", "cap"],
                    "the arguments of `full_jitter`",
                    "",
                );
                lowering.push(Diagnostic::new(
                    Kind::UnknownSetting {
                        keyword: "full_jitter".to_owned(),
                        key: key_text,
                        help,
                    },
                    arg.loc,
                    "unknown or repeated",
                ));
            }
        }
    }
    let has = |name: &str| {
        call.args
            .iter()
            .any(|arg| arg.key.as_ref().is_some_and(|key| key.text == name))
    };
    for (arg, example) in [("base", "base = 50ms"), ("cap", "cap = 1s")] {
        if !has(arg) {
            complete = false;
            lowering.push(Diagnostic::new(
                Kind::MissingSetting {
                    what: "`full_jitter`".to_owned(),
                    key: arg.to_owned(),
                    example: example.to_owned(),
                },
                call.loc,
                format!("no `{arg}`"),
            ));
        }
    }
    match (base, cap) {
        (Some(base), Some(cap)) if complete => Some(Located::new(
            Backoff::FullJitter {
                base: base.value,
                cap: cap.value,
            },
            call.loc,
        )),
        _ => None,
    }
}

/// `P% + N/s` or `P%`: the share of recent calls retries may add, and a floor per second.
fn lower_allowance(
    lowering: &mut Lowering<'_>,
    key: &str,
    value: &Value,
) -> Option<Located<AllowanceConfig>> {
    let (ratio, floor) = match value.terms.as_slice() {
        [Term::Quantity(ratio)] => (ratio, None),
        [Term::Quantity(ratio), Term::Plus(_), Term::Quantity(floor)]
            if floor.unit.as_deref() == Some("/s") =>
        {
            (ratio, Some(floor))
        }
        _ => {
            lowering.invalid(key, "`P% + N/s`", value, value.loc, "write the share of recent calls retries may add, plus a floor per second: `allowance = 20% + 10/s`".to_owned());
            return None;
        }
    };
    let ratio = lowering.quantity_ratio(key, ratio)?;
    let floor = match floor {
        Some(floor) => {
            let per_second = Quantity {
                unit: None,
                ..floor.clone()
            };
            lowering.quantity_count(key, &per_second)?.value
        }
        None => 0,
    };
    Some(Located::new(
        allowance_as_written(ratio.value, floor),
        value.loc,
    ))
}

pub(super) fn lower_shedding(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    const KEYS: &[&str] = &[];
    const HELP_FORM: &str = "write `deferred at load 0.5` or `background at load 0.25`";
    lowering.unnamed(stanza);
    let body = lowering.body(stanza, KEYS);
    let mut shedding = SheddingSpec::new(stanza.loc);
    let (mut deferred, mut background): (Option<Loc>, Option<Loc>) = (None, None);
    for phrase in &body.phrases {
        match phrase.terms.as_slice() {
            [Term::Word(class), at, load, Term::Quantity(threshold)]
                if (class.text == "deferred" || class.text == "background")
                    && word(at, "at")
                    && word(load, "load") =>
            {
                let seen = if class.text == "deferred" {
                    &mut deferred
                } else {
                    &mut background
                };
                if let Some(first) = *seen {
                    lowering.push(
                        Diagnostic::new(
                            Kind::DuplicateSetting {
                                key: class.text.clone(),
                            },
                            class.loc,
                            "set again here",
                        )
                        .with_label(first, "first set here"),
                    );
                    continue;
                }
                *seen = Some(class.loc);
                if let Some(ratio) = lowering.quantity_ratio(&class.text, threshold) {
                    if class.text == "deferred" {
                        shedding.deferred = ratio;
                    } else {
                        shedding.background = ratio;
                    }
                }
            }
            _ => lowering.invalid(
                "shedding",
                "`CLASS at load RATIO`",
                *phrase,
                phrase.loc,
                HELP_FORM.to_owned(),
            ),
        }
    }
    match &lowering.spec.shedding {
        Some(first) => {
            let first = first.loc;
            lowering.push(
                Diagnostic::new(
                    Kind::DuplicateStanza {
                        keyword: "shedding".to_owned(),
                    },
                    stanza.keyword.loc,
                    "declared again here",
                )
                .with_label(first, "first declared here"),
            );
        }
        None => lowering.spec.shedding = Some(shedding),
    }
}

pub(super) fn lower_ratelimit(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    const KEYS: &[&str] = &["on_timeout", "on_error", "local_rate"];
    let name = lowering.named(stanza);
    let body = lowering.body(stanza, KEYS);
    let mut rate: Option<Located<Rate>> = None;
    let mut rate_seen: Option<Loc> = None;
    for phrase in &body.phrases {
        match phrase.terms.as_slice() {
            [Term::Quantity(_), per, Term::Quantity(_)] if word(per, "per") => {
                if let Some(first) = rate_seen {
                    lowering.push(
                        Diagnostic::new(
                            Kind::DuplicateSetting {
                                key: "per".to_owned(),
                            },
                            phrase.loc,
                            "set again here",
                        )
                        .with_label(first, "first set here"),
                    );
                    continue;
                }
                rate_seen = Some(phrase.loc);
                rate = lowering.rate("rate", phrase);
            }
            _ => lowering.unknown_phrase(
                stanza,
                phrase,
                &["N per DURATION", "on_timeout", "on_error", "local_rate"],
            ),
        }
    }
    let what = name.as_ref().map_or_else(
        || "ratelimit".to_owned(),
        |name| format!("ratelimit `{}`", name.value),
    );
    if rate_seen.is_none() {
        lowering.missing(&body, &what, "N per DURATION", "100 per 1m");
    }
    // Both modes are optional (`local` when not set); critical work must choose them, which
    // the validator checks where it knows the operations (`policy::ratelimit-fail-mode-unset`).
    let mut complete = true;
    let mut modes = [None, None];
    for (slot, key) in modes.iter_mut().zip(["on_timeout", "on_error"]) {
        if let Some((key, value)) = body.get(key) {
            *slot = lowering.fail_mode(&key.text, value);
            complete &= slot.is_some();
        }
    }
    let local_rate = body.get("local_rate").and_then(|(key, value)| {
        let rate = lowering.rate(&key.text, value);
        complete &= rate.is_some();
        rate
    });
    match (name, rate) {
        (Some(name), Some(rate)) if complete => {
            let mut ratelimit = RatelimitSpec::new(name, rate, stanza.loc);
            let [on_timeout, on_error] = modes;
            if let Some(mode) = on_timeout {
                ratelimit.set_on_timeout(mode);
            }
            if let Some(mode) = on_error {
                ratelimit.set_on_error(mode);
            }
            if let Some(rate) = local_rate {
                ratelimit.set_local_rate(rate);
            }
            insert(
                &mut lowering.spec.ratelimits,
                ratelimit,
                &mut lowering.diagnostics,
            );
        }
        (name, ..) => lowering.drop_item("ratelimit", name),
    }
}
