//! Lowering the build-time and delivery stanzas: `assets` (`policy assets`), `locality`
//! (`policy locality`), `ceilings` and `quarantine` (`policy gate`).

use super::{Lowering, insert, word};
use crate::ast::{Ident, Quantity, Stanza, StatementKind, Term, Value};
use crate::diagnostic::{Diagnostic, Kind};
use crate::source::Located;
use crate::spec::{
    Amount, AssetsSpec, Ceiling, CeilingsSpec, Compression, HopKind, HopSpec, LocalitySpec, Metric,
    QuarantineSpec, WebMetric,
};
use crate::suggest;
use crate::units::{QuantityError, SIZE_UNITS};

pub(super) fn lower_assets(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    const KEYS: &[&str] = &[
        "dir",
        "max_image",
        "large_image",
        "max_font",
        "max_font_files",
        "max_font_weights",
        "max_high_priority",
        "max_preloads",
    ];
    let name = lowering.named(stanza);
    let body = lowering.body(stanza, KEYS);
    for phrase in &body.phrases {
        lowering.unknown_phrase(stanza, phrase, KEYS);
    }
    let Some(name) = name else {
        return;
    };
    let mut assets = AssetsSpec::new(name, stanza.loc);
    let mut complete = true;
    for (key, value) in &body.settings {
        let key = key.text.as_str();
        let lowered = match key {
            "dir" => lowering.string(key, value).map(|s| assets.dir = Some(s)),
            "max_image" => lower_size(lowering, key, value).map(|s| assets.max_image = s),
            "large_image" => lower_size(lowering, key, value).map(|s| assets.large_image = s),
            "max_font" => lower_size(lowering, key, value).map(|s| assets.max_font = s),
            "max_font_files" => lowering
                .count(key, value)
                .map(|n| assets.max_font_files = n),
            "max_font_weights" => lowering
                .count(key, value)
                .map(|n| assets.max_font_weights = n),
            "max_high_priority" => lowering
                .count(key, value)
                .map(|n| assets.max_high_priority = n),
            "max_preloads" => lowering.count(key, value).map(|n| assets.max_preloads = n),
            _ => Some(()),
        };
        complete &= lowered.is_some();
    }
    if complete && !stanza.has_errors {
        insert(&mut lowering.spec.assets, assets, &mut lowering.diagnostics);
    }
}

/// A size: `200kb`, `1.5mb`, `512b` (powers of 1024).
fn lower_size(lowering: &mut Lowering<'_>, key: &str, value: &Value) -> Option<Located<u64>> {
    const EXPECTED: &str = "a size like `200kb`";
    let quantity = lowering.single_quantity(key, value, EXPECTED, "200kb")?;
    let help = match quantity.as_size() {
        Ok(bytes) => return Some(Located::new(bytes, quantity.loc)),
        Err(QuantityError::MissingUnit) => format!(
            "add a unit: `{n}kb`, `{n}mb` or `{n}b`",
            n = quantity.number
        ),
        Err(QuantityError::UnknownUnit(unit)) => {
            match suggest::closest(&unit, SIZE_UNITS.iter().copied()) {
                Some(unit) => format!("did you mean `{}{unit}`?", quantity.number),
                None => "sizes take the units `b`, `kb`, `mb` and `gb`".to_owned(),
            }
        }
        Err(QuantityError::Negative) => "a size is zero or more, such as `200kb`".to_owned(),
        Err(_) => "this size is too large to represent".to_owned(),
    };
    lowering.invalid(key, EXPECTED, quantity, quantity.loc, help);
    None
}

/// The form of a hop's value, for diagnostics.
const HOP_FORM: &str = "`blocking env VARIABLE` or `async env VARIABLE`";

pub(super) fn lower_locality(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    lowering.unnamed(stanza);
    let mut locality = LocalitySpec::new(stanza.loc);
    for statement in &stanza.statements {
        match &statement.kind {
            StatementKind::Setting { key, value } => {
                if let Some(hop) = lower_hop(lowering, key, value) {
                    insert(&mut locality.hops, hop, &mut lowering.diagnostics);
                }
            }
            StatementKind::Phrase(phrase) => lowering.invalid(
                "locality",
                "`NAME = blocking env VARIABLE`",
                phrase,
                phrase.loc,
                "name each hop after the service it calls: `database = blocking env DATABASE_URL`"
                    .to_owned(),
            ),
        }
    }
    if stanza.statements.is_empty() && !stanza.has_errors {
        lowering.push(Diagnostic::new(
            Kind::EmptyLocality,
            stanza.keyword.loc,
            "no hops",
        ));
    }
    match &lowering.spec.locality {
        Some(first) => {
            let first = first.loc;
            lowering.push(
                Diagnostic::new(
                    Kind::DuplicateStanza {
                        keyword: "locality".to_owned(),
                    },
                    stanza.keyword.loc,
                    "declared again here",
                )
                .with_label(first, "first declared here"),
            );
        }
        None => lowering.spec.locality = Some(locality),
    }
}

/// `NAME = blocking env VARIABLE` or `NAME = async env VARIABLE`.
fn lower_hop(lowering: &mut Lowering<'_>, key: &Ident, value: &Value) -> Option<HopSpec> {
    let hop = key.text.as_str();
    if let [Term::Word(kind), env, Term::Word(variable)] = value.terms.as_slice()
        && word(env, "env")
    {
        let Some(found) = HopKind::from_name(&kind.text) else {
            let help = match suggest::closest(&kind.text, ["blocking", "async"]) {
                Some(kind) => format!("did you mean `{kind}`?"),
                None => "a hop is `blocking` (the request waits for it) or `async` (it does not)"
                    .to_owned(),
            };
            lowering.push(Diagnostic::new(
                Kind::UnknownHopKind {
                    hop: hop.to_owned(),
                    kind: kind.text.clone(),
                    help,
                },
                kind.loc,
                "unknown",
            ));
            return None;
        };
        return Some(HopSpec::new(
            Located::new(hop.to_owned(), key.loc),
            Located::new(found, kind.loc),
            Located::new(variable.text.clone(), variable.loc),
            key.loc.to(value.loc),
        ));
    }
    let help = match value.terms.as_slice() {
        [env, Term::Word(variable)] if word(env, "env") => format!(
            "say whether the request waits for it: `{hop} = blocking env {0}` or `{hop} = async env {0}`",
            variable.text
        ),
        [Term::Word(kind), Term::Word(variable)] if HopKind::from_name(&kind.text).is_some() => {
            format!(
                "write `env` before the variable: `{hop} = {} env {}`",
                kind.text, variable.text
            )
        }
        [Term::Word(kind), env, Term::Str(variable)] if word(env, "env") => format!(
            "write the variable's name without quotes: `{hop} = {} env {}`",
            kind.text, variable.value
        ),
        _ => format!(
            "name the variable whose connection string locates the service, as in `{hop} = blocking env DATABASE_URL`: the region is derived from it where the check runs, never written here"
        ),
    };
    lowering.invalid(hop, HOP_FORM, value, value.loc, help);
    None
}

// ---- the build-time side: ceilings and quarantines (`policy gate`) ---------------------------

const CEILING_FORM: &str = "`METRIC [gzip] at most CEILING measured VALUE headroom P%`";
const CEILING_EXAMPLE: &str = "baseline_js_kb at most 82kb measured 77.7kb headroom 5%";

pub(super) fn lower_ceilings(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    const KEYS: &[&str] = &["dir"];
    let name = lowering.named(stanza);
    let body = lowering.body(stanza, KEYS);
    let stanza_name = name
        .as_ref()
        .map_or("", |name| name.value.as_str())
        .to_owned();
    let mut complete = true;
    let mut lines: Vec<Ceiling> = Vec::new();
    for phrase in &body.phrases {
        let Some(ceiling) = lower_ceiling(lowering, &stanza_name, phrase) else {
            complete = false;
            continue;
        };
        let seen = lines.iter().find(|seen| {
            seen.metric.value == ceiling.metric.value && seen.compression == ceiling.compression
        });
        if let Some(first) = seen {
            let first = first.metric.loc;
            lowering.push(
                Diagnostic::new(
                    Kind::DuplicateSetting {
                        key: ceiling.label(),
                    },
                    ceiling.metric.loc,
                    "set again here",
                )
                .with_label(first, "first set here"),
            );
            complete = false;
            continue;
        }
        lines.push(ceiling);
    }
    let dir = lowering.optional_string(&body, "dir", &mut complete);
    if dir.is_none()
        && body.get("dir").is_none()
        && lines
            .iter()
            .any(|ceiling| matches!(ceiling.metric.value, Metric::Web(_)))
    {
        let what = format!("ceilings `{stanza_name}`");
        lowering.missing(&body, &what, "dir", "dir = \"web/dist\"");
        complete = false;
    }
    match name {
        Some(name) if complete && !stanza.has_errors => {
            let mut ceilings = CeilingsSpec::new(name, stanza.loc);
            ceilings.dir = dir;
            ceilings.lines = lines;
            insert(
                &mut lowering.spec.ceilings,
                ceilings,
                &mut lowering.diagnostics,
            );
        }
        name => lowering.drop_item("ceilings", name),
    }
}

/// One line of a `ceilings` stanza; `None` if it was wrong (and reported).
fn lower_ceiling(lowering: &mut Lowering<'_>, stanza: &str, phrase: &Value) -> Option<Ceiling> {
    let form_error = |lowering: &mut Lowering<'_>, key: &str| {
        lowering.invalid(
            key,
            CEILING_FORM,
            phrase,
            phrase.loc,
            format!("for example `{CEILING_EXAMPLE}`"),
        );
    };
    let [Term::Word(keyword), rest @ ..] = phrase.terms.as_slice() else {
        form_error(lowering, "ceilings");
        return None;
    };
    let (metric, rest) = if let Some(web) = WebMetric::from_name(&keyword.text) {
        (Located::new(Metric::Web(web), keyword.loc), rest)
    } else if Metric::WITH_TARGET.contains(&keyword.text.as_str()) {
        let [Term::Str(target), rest @ ..] = rest else {
            let what = match keyword.text.as_str() {
                "crates" => "the package",
                "files" => "a glob",
                _ => "the path of the binary",
            };
            lowering.invalid(
                &keyword.text,
                &format!("{what} in quotes"),
                phrase,
                phrase.loc,
                format!(
                    "write it as `{} \"...\" at most ... measured ... headroom ...`",
                    keyword.text
                ),
            );
            return None;
        };
        let metric = match keyword.text.as_str() {
            "binary" => Metric::Binary(target.value.clone()),
            "binary_code" => Metric::BinaryCode(target.value.clone()),
            "crates" => Metric::Crates(target.value.clone()),
            _ => Metric::Files(target.value.clone()),
        };
        (Located::new(metric, keyword.loc.to(target.loc)), rest)
    } else {
        let help = suggest::did_you_mean(&keyword.text, Metric::names(), "the metrics", "");
        lowering.push(Diagnostic::new(
            Kind::UnknownMetric {
                ceilings: stanza.to_owned(),
                metric: keyword.text.clone(),
                help,
            },
            keyword.loc,
            "not a metric",
        ));
        return None;
    };
    let (compression, rest) = match rest {
        [Term::Word(gzip), rest @ ..] if gzip.text == "gzip" => {
            if !metric.value.can_compress() {
                lowering.invalid(
                    "gzip",
                    "a front-end metric or `files`",
                    &metric.value.keyword(),
                    gzip.loc,
                    "compressed sizes are measured for the front-end metrics and `files`: remove `gzip`"
                        .to_owned(),
                );
                return None;
            }
            (Compression::Gzip, rest)
        }
        rest => (Compression::Raw, rest),
    };
    let [
        at,
        most,
        Term::Quantity(ceiling),
        measured_word,
        Term::Quantity(measured),
        headroom_word,
        Term::Quantity(headroom),
    ] = rest
    else {
        form_error(lowering, metric.value.keyword());
        return None;
    };
    if !(word(at, "at")
        && word(most, "most")
        && word(measured_word, "measured")
        && word(headroom_word, "headroom"))
    {
        form_error(lowering, metric.value.keyword());
        return None;
    }
    let is_count = metric.value.is_count();
    let key = metric.value.keyword();
    let ceiling = lower_amount(lowering, key, ceiling, is_count);
    let measured = lower_amount(lowering, key, measured, is_count);
    let headroom = lowering.quantity_ratio("headroom", headroom);
    let mut ceiling = Ceiling::new(metric, ceiling?, measured?, headroom?, phrase.loc);
    ceiling.compression = compression;
    Some(ceiling)
}

/// A size in bytes (`82kb`) or, for a count, a whole number.
fn lower_amount(
    lowering: &mut Lowering<'_>,
    key: &str,
    quantity: &Quantity,
    is_count: bool,
) -> Option<Located<Amount>> {
    if is_count {
        let count = lowering.quantity_count(key, quantity)?;
        return Some(Located::new(
            Amount::new(u64::from(count.value), None),
            count.loc,
        ));
    }
    let expected = "a size like `82kb`";
    match quantity.as_size() {
        Ok(bytes) => {
            return Some(Located::new(
                Amount::new(bytes, quantity.unit.clone()),
                quantity.loc,
            ));
        }
        Err(QuantityError::MissingUnit) => lowering.invalid(
            key,
            expected,
            quantity,
            quantity.loc,
            format!(
                "add a unit: `{}b`, `{}kb` or `{}mb` (1kb = 1024 bytes)",
                quantity.number, quantity.number, quantity.number
            ),
        ),
        Err(QuantityError::UnknownUnit(unit)) => {
            let lowercase = unit.to_ascii_lowercase();
            let closest = SIZE_UNITS
                .contains(&lowercase.as_str())
                .then_some(lowercase.as_str())
                .or_else(|| suggest::closest(&unit, SIZE_UNITS.iter().copied()));
            let help = match closest {
                Some(unit) => format!("did you mean `{}{unit}`?", quantity.number),
                None => "sizes take the units `b`, `kb`, `mb` and `gb`".to_owned(),
            };
            lowering.invalid(key, expected, quantity, quantity.loc, help);
        }
        Err(_) => lowering.invalid(
            key,
            expected,
            quantity,
            quantity.loc,
            "a size is zero or more bytes".to_owned(),
        ),
    }
    None
}

pub(super) fn lower_quarantine(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    const KEYS: &[&str] = &[
        "crate",
        "feature",
        "package",
        "behind",
        "only",
        "justification",
    ];
    let name = lowering.named(stanza);
    let body = lowering.body(stanza, KEYS);
    for phrase in &body.phrases {
        lowering.unknown_phrase(stanza, phrase, KEYS);
    }
    let what = name.as_ref().map_or_else(
        || "quarantine".to_owned(),
        |name| format!("quarantine `{}`", name.value),
    );
    let package = match body.get("package") {
        Some((key, value)) => lowering.string(&key.text, value),
        None => {
            lowering.missing(&body, &what, "package", "package = \"my-service\"");
            None
        }
    };
    let behind = match body.get("behind") {
        Some((key, value)) => lowering.string(&key.text, value),
        None => {
            lowering.missing(&body, &what, "behind", "behind = \"sqlite\"");
            None
        }
    };
    let mut complete = true;
    let krate = lowering.optional_string(&body, "crate", &mut complete);
    let feature = lowering.optional_string(&body, "feature", &mut complete);
    if let Some(feature) = &feature
        && !feature
            .value
            .split_once('/')
            .is_some_and(|(package, name)| !package.is_empty() && !name.is_empty())
    {
        complete = false;
        lowering.invalid(
            "feature",
            "a package's feature as `package/feature`",
            &feature.value,
            feature.loc,
            "name the package and its feature: `feature = \"velocity-policy-runtime/chaos\"`"
                .to_owned(),
        );
    }
    let only = match body.get("only") {
        Some((key, value)) => {
            let mut only = Vec::new();
            for term in &value.terms {
                if let Term::Str(string) = term {
                    only.push(Located::new(string.value.clone(), string.loc));
                } else {
                    complete = false;
                    lowering.invalid(
                        &key.text,
                        "crate names in quotes",
                        term,
                        term.loc(),
                        "list the crates allowed to depend on it directly: `only = \"my-db\" \"my-service\"`"
                            .to_owned(),
                    );
                }
            }
            only
        }
        None => Vec::new(),
    };
    let justification = match body.get("justification") {
        Some((key, value)) => match lowering.string(&key.text, value) {
            Some(text) if text.value.trim().is_empty() => {
                complete = false;
                lowering.invalid(
                    &key.text,
                    "a reason",
                    value,
                    value.loc,
                    "say why the default build needs it, or remove `justification`".to_owned(),
                );
                None
            }
            Some(text) => Some(text),
            None => {
                complete = false;
                None
            }
        },
        None => None,
    };
    match (name, package, behind) {
        (Some(name), Some(package), Some(behind)) if complete && !stanza.has_errors => {
            let mut quarantine = QuarantineSpec::new(name, package, behind, stanza.loc);
            quarantine.krate = krate;
            quarantine.feature = feature;
            quarantine.only = only;
            quarantine.justification = justification;
            insert(
                &mut lowering.spec.quarantines,
                quarantine,
                &mut lowering.diagnostics,
            );
        }
        (name, ..) => lowering.drop_item("quarantine", name),
    }
}

#[cfg(test)]
mod ceilings_and_quarantine_tests {
    use crate::PolicySet;
    use crate::spec::{Compression, Metric, WebMetric};

    #[test]
    fn ceilings_and_quarantines_lower_to_the_model() {
        let mut set = PolicySet::new();
        set.add_source(
            "gate.policy",
            br#"
ceilings web {
    dir = "dist"
    baseline_js_kb gzip at most 82kb measured 77.7kb headroom 5%
    crates "app" at most 180 measured 171 headroom 3%
}
quarantine tokio_util { package = "app"; behind = "net"; only = "a" "b-c"; justification = "why" }
"#,
        );
        assert!(set.check().all().is_empty());
        let ceilings = set.spec().ceilings.get("web").unwrap();
        assert_eq!(ceilings.dir.as_ref().unwrap().value, "dist");
        let [js, crates] = ceilings.lines.as_slice() else {
            panic!("two lines expected")
        };
        assert_eq!(js.metric.value, Metric::Web(WebMetric::BaselineJs));
        assert_eq!(js.compression, Compression::Gzip);
        assert_eq!(js.at_most.value.value, 82 * 1024);
        assert_eq!(js.at_most.value.unit.as_deref(), Some("kb"));
        assert_eq!(js.measured.value.value, 79_565); // 77.7 × 1024, rounded
        assert!((js.headroom.value - 0.05).abs() < 1e-12);
        assert_eq!(js.label(), "baseline_js_kb gzip");
        assert_eq!(crates.metric.value, Metric::Crates("app".to_owned()));
        assert_eq!(
            (
                crates.at_most.value.value,
                crates.at_most.value.unit.as_deref()
            ),
            (180, None)
        );
        assert_eq!(crates.label(), "crates \"app\"");

        let quarantine = set.spec().quarantines.get("tokio_util").unwrap();
        assert_eq!(quarantine.package.value, "app");
        assert_eq!(quarantine.behind.value, "net");
        let only: Vec<&str> = quarantine.only.iter().map(|c| c.value.as_str()).collect();
        assert_eq!(only, ["a", "b-c"]);
        assert_eq!(quarantine.justification.as_ref().unwrap().value, "why");
    }
}
