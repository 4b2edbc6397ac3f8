//! The hops a policy's `locality` stanza declares, judged against the probe's map
//! (`policy locality [--check]`).
//!
//! The map is the locality probe's ([`LocalityMap`]): regions only, never a host, a user, a
//! password or any other part of a variable's value. The hops come from the policy's
//! `locality` stanza. Judged ([`judge`]), a blocking hop to another region is an error
//! (`policy::cross-region-hop`), a hop whose variable locates nothing is an error
//! (`policy::hop-not-located`), and a blocking hop whose relation cannot be derived is a warning
//! (`policy::unknown-region`): `region: null` is an answer, and the warning says why.
//!
//! ```
//! use velocity_policy_delivery::locality::env_file::EnvFile;
//! use velocity_policy_delivery::locality::hops::{Environment, assess, hops_table, judge};
//! use velocity_policy_lang::PolicySet;
//!
//! let mut policy = PolicySet::new();
//! policy.add_source("service.policy", b"locality { database = blocking env DATABASE_URL }\n");
//! let path = std::env::temp_dir().join(format!("policy-hops-doc-{}.env", std::process::id()));
//! std::fs::write(&path, "VERCEL=1\nVERCEL_REGION=iad1\nDATABASE_URL=postgres://u:p@ep-x.eu-central-1.aws.neon.tech/db\n")?;
//! let environment = Environment::File(EnvFile::read(&path)?);
//! let map = environment.map();
//! let hops = &policy.spec().locality.as_ref().unwrap().hops;
//! let assessed: Vec<_> = hops.iter().map(|hop| assess(&map, &environment, hop)).collect();
//! assert!(hops_table(&assessed).contains("crosses regions  us-east-1 → eu-central-1"));
//! let found = judge(&assessed[0]).unwrap();
//! assert_eq!(found.code(), "policy::cross-region-hop");
//! # std::fs::remove_file(&path)?;
//! # Ok::<(), std::io::Error>(())
//! ```

use serde_json::{Value, json};
use velocity_policy_lang::{Diagnostic, HopSpec, Kind};

use super::env_file::EnvFile;
use super::{ComputeSite, LocalityMap, Region, RegionMatch, ServiceSite};

/// Where the variables come from.
#[derive(Debug)]
pub enum Environment {
    /// The process environment.
    Process,
    /// An environment file (`--env-file`).
    File(EnvFile),
}

impl Environment {
    /// The locality probe's map of these variables.
    #[must_use]
    pub fn map(&self) -> LocalityMap {
        match self {
            Environment::Process => LocalityMap::from_env(),
            Environment::File(file) => LocalityMap::from_vars(file.vars()),
        }
    }

    /// Whether `name` is set (to anything, even nothing).
    #[must_use]
    pub fn is_set(&self, name: &str) -> bool {
        match self {
            Environment::Process => std::env::var_os(name).is_some(),
            Environment::File(file) => file.is_set(name),
        }
    }
}

/// How one declared hop's service relates to the compute.
#[derive(Debug, Clone, PartialEq)]
enum Relation {
    /// Same region (`region` is `None` for a local service, beside the compute wherever it runs).
    Same { region: Option<Region> },
    /// Different regions of one cloud: every round trip pays the distance.
    Crosses { compute: Region, service: Region },
    /// Not derivable; `reason` says why, in the probe's words or ours, never in the input's.
    Unknown { reason: String, side: Side },
    /// The variable locates no service: not set, or not a connection string.
    NotLocated { set: bool },
}

/// Which side of an unknown relation is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Compute,
    Service,
    Clouds,
}

/// One declared hop with what the environment says about it, made by [`assess`].
#[derive(Debug)]
pub struct Assessed<'a> {
    hop: &'a HopSpec,
    service: Option<&'a ServiceSite>,
    relation: Relation,
}

/// How `hop`'s service relates to the compute, in `map` (probed from `environment`).
#[must_use]
pub fn assess<'a>(
    map: &'a LocalityMap,
    environment: &Environment,
    hop: &'a HopSpec,
) -> Assessed<'a> {
    let variable = hop.variable.value.as_str();
    let service = map.service(variable);
    let relation = match service {
        None => Relation::NotLocated {
            set: environment.is_set(variable),
        },
        Some(service) => relation(map, service),
    };
    Assessed {
        hop,
        service,
        relation,
    }
}

fn relation(map: &LocalityMap, service: &ServiceSite) -> Relation {
    let compute = map.compute().and_then(ComputeSite::region);
    match (
        service.relative_to(map.compute()),
        compute,
        service.region(),
    ) {
        (RegionMatch::Same, _, region) => Relation::Same {
            region: region.cloned(),
        },
        (RegionMatch::Different, Some(compute), Some(region)) => Relation::Crosses {
            compute: compute.clone(),
            service: region.clone(),
        },
        (_, _, None) => Relation::Unknown {
            reason: service
                .reason()
                .unwrap_or("the service's region is not derivable")
                .to_owned(),
            side: Side::Service,
        },
        (_, None, Some(_)) => Relation::Unknown {
            reason: map
                .compute_reason()
                .unwrap_or("the compute's region is not derivable")
                .to_owned(),
            side: Side::Compute,
        },
        (_, Some(compute), Some(region)) => Relation::Unknown {
            reason: format!(
                "the compute runs in `{compute}` ({}), the service in `{region}` ({}), and regions of two clouds are not compared",
                compute.cloud(),
                region.cloud()
            ),
            side: Side::Clouds,
        },
    }
}

/// What the hops table says about a relation: a word, and the detail.
fn describe(assessed: &Assessed<'_>) -> (&'static str, String) {
    let variable = &assessed.hop.variable.value;
    match &assessed.relation {
        Relation::Same {
            region: Some(region),
        } => ("same region", region.to_string()),
        Relation::Same { region: None } => (
            "same region",
            assessed
                .service
                .and_then(ServiceSite::reason)
                .unwrap_or_default()
                .to_owned(),
        ),
        Relation::Crosses { compute, service } => {
            ("crosses regions", format!("{compute} → {service}"))
        }
        Relation::Unknown {
            reason,
            side: Side::Compute,
        } => ("unknown", format!("compute: {reason}")),
        Relation::Unknown { reason, .. } => ("unknown", reason.replace('`', "")),
        Relation::NotLocated { set: false } => ("not located", format!("{variable} is not set")),
        Relation::NotLocated { set: true } => (
            "not located",
            format!("{variable} holds no connection string"),
        ),
    }
}

/// The JSON word for a relation: the probe's `same`, `different`, `unknown`, or `not_located`.
fn relation_id(relation: &Relation) -> &'static str {
    match relation {
        Relation::Same { .. } => RegionMatch::Same.id(),
        Relation::Crosses { .. } => RegionMatch::Different.id(),
        Relation::Unknown { .. } => RegionMatch::Unknown.id(),
        Relation::NotLocated { .. } => "not_located",
    }
}

/// One hop as JSON: its name, kind and variable, the relation (`same`, `different`,
/// `unknown` or `not_located`), the service's region and, when unknown, why.
#[must_use]
pub fn hop_json(assessed: &Assessed<'_>) -> Value {
    let reason = match &assessed.relation {
        Relation::Same { .. } | Relation::Crosses { .. } => None,
        Relation::Unknown { .. } | Relation::NotLocated { .. } => Some(describe(assessed).1),
    };
    json!({
        "name": assessed.hop.name.value,
        "kind": assessed.hop.kind.value.as_str(),
        "variable": assessed.hop.variable.value,
        "relation": relation_id(&assessed.relation),
        "region": assessed.service.and_then(ServiceSite::region),
        "reason": reason,
    })
}

/// The diagnostic of `--check` for one hop, if it has one: a blocking hop to another region
/// (`policy::cross-region-hop`), a hop whose variable locates nothing
/// (`policy::hop-not-located`), a blocking hop whose relation cannot be derived
/// (`policy::unknown-region`, a warning).
#[must_use]
pub fn judge(assessed: &Assessed<'_>) -> Option<Diagnostic> {
    let hop = assessed.hop;
    let name = hop.name.value.clone();
    let variable = hop.variable.value.clone();
    match &assessed.relation {
        Relation::NotLocated { set } => {
            let (why, label) = if *set {
                (
                    format!(
                        "`{variable}` holds no connection string the probe reads (its value is not shown)"
                    ),
                    "no connection string",
                )
            } else {
                (format!("`{variable}` is not set"), "not set")
            };
            Some(Diagnostic::new(
                Kind::HopNotLocated {
                    hop: name,
                    variable,
                    why,
                },
                hop.variable.loc,
                label,
            ))
        }
        Relation::Crosses { compute, service } if hop.is_blocking() => Some(
            Diagnostic::new(
                Kind::CrossRegionHop {
                    hop: name,
                    compute: compute.to_string(),
                    service: service.to_string(),
                },
                hop.kind.loc,
                "the request waits for this call",
            )
            .with_label(
                hop.variable.loc,
                format!("locates the service in `{service}`"),
            ),
        ),
        Relation::Unknown { reason, side } if hop.is_blocking() => {
            let (label, help) = match side {
                Side::Service => (
                    "region unknown",
                    "`region: null` is an answer, not a failure: look the region up with the provider, then move the service beside the compute or make the hop `async`",
                ),
                Side::Compute => (
                    "the compute's region is unknown",
                    "check the environment the code runs in, or give the one checked the platform's region variable (`VERCEL_REGION=fra1` in the `--env-file`, say)",
                ),
                Side::Clouds => (
                    "in another cloud than the compute",
                    "compare the two regions yourself, or move the service into the compute's cloud",
                ),
            };
            Some(Diagnostic::new(
                Kind::UnknownRegion {
                    hop: name,
                    reason: reason.clone(),
                    help: help.to_owned(),
                },
                hop.variable.loc,
                label,
            ))
        }
        Relation::Same { .. } | Relation::Crosses { .. } | Relation::Unknown { .. } => None,
    }
}

/// One aligned row per hop: kind, `compute → NAME`, variable, relation, detail; columns two
/// spaces apart, as the probe prints its map.
#[must_use]
pub fn hops_table(assessed: &[Assessed<'_>]) -> String {
    let rows: Vec<[String; 5]> = assessed
        .iter()
        .map(|assessed| {
            let (relation, detail) = describe(assessed);
            [
                assessed.hop.kind.value.to_string(),
                format!("compute → {}", assessed.hop.name.value),
                format!("env:{}", assessed.hop.variable.value),
                relation.to_owned(),
                detail,
            ]
        })
        .collect();
    let mut widths = [0_usize; 5];
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut table = String::new();
    for row in &rows {
        let mut line = String::new();
        for (cell, width) in row.iter().zip(widths) {
            line.push_str(cell);
            let padding = width.saturating_sub(cell.chars().count()) + 2;
            line.extend(std::iter::repeat_n(' ', padding));
        }
        table.push_str(line.trim_end());
        table.push('\n');
    }
    table
}
