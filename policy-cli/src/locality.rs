//! `policy locality [FILE...] [--check] [--format json] [--env-file PATH]`: where the compute
//! and each service run, derived from the environment, and the hops the policy declares.
//!
//! The map is the locality probe's (`policy_delivery::locality`): regions only, never a host, a
//! user, a password or any other part of a variable's value. The hops come from the policy's
//! `locality` stanza. With `--check`, a blocking hop to another region is an error
//! (`policy::cross-region-hop`), a hop whose variable locates nothing is an error
//! (`policy::hop-not-located`), and a blocking hop whose relation cannot be derived is a warning
//! (`policy::unknown-region`): `region: null` is an answer, and the warning says why.

use std::io::Write;
use std::path::PathBuf;

use policy_delivery::locality::{ComputeSite, LocalityMap, Region, RegionMatch, ServiceSite};
use policy_lang::{Diagnostic, HopSpec, Kind, PolicySet, Report};
use serde_json::{Value, json};

use crate::env_file::EnvFile;
use crate::{Exit, Format, check, render};

/// Arguments of `policy locality`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Policy files, or directories whose `*.policy` files are read, whose `locality` stanza
    /// declares the hops. Without any, only the map is printed.
    pub files: Vec<PathBuf>,
    /// Judge the declared hops: exit 1 when a blocking hop crosses regions or a hop's variable
    /// locates no service; warn when a region cannot be derived.
    #[arg(long, requires = "files")]
    pub check: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
    /// Read the variables from this file (`NAME=VALUE` lines, as in `.env`) instead of the
    /// process environment.
    #[arg(long, value_name = "PATH")]
    pub env_file: Option<PathBuf>,
}

/// Where the variables come from.
enum Environment {
    Process,
    File(EnvFile),
}

impl Environment {
    fn map(&self) -> LocalityMap {
        match self {
            Environment::Process => LocalityMap::from_env(),
            Environment::File(file) => LocalityMap::from_vars(file.vars()),
        }
    }

    fn is_set(&self, name: &str) -> bool {
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

/// One declared hop with what the environment says about it.
struct Assessed<'a> {
    hop: &'a HopSpec,
    service: Option<&'a ServiceSite>,
    relation: Relation,
}

fn assess<'a>(map: &'a LocalityMap, environment: &Environment, hop: &'a HopSpec) -> Assessed<'a> {
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

fn hop_json(assessed: &Assessed<'_>) -> Value {
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

/// The diagnostics of `--check` for one hop.
fn judge(assessed: &Assessed<'_>) -> Option<Diagnostic> {
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
fn hops_table(assessed: &[Assessed<'_>]) -> String {
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

/// Runs `policy locality`.
pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    let environment = match &args.env_file {
        None => Environment::Process,
        Some(path) => match EnvFile::read(path) {
            Ok(file) => {
                for line in file.skipped() {
                    let _ = writeln!(
                        err,
                        "warning: line {line} of `{}` is not `NAME=VALUE`; skipped (its text is not shown)",
                        path.display()
                    );
                }
                Environment::File(file)
            }
            Err(error) => {
                let _ = writeln!(err, "{}", crate::files::io_error(path, &error));
                return Exit::Usage;
            }
        },
    };
    let (set, files) = if args.files.is_empty() {
        (PolicySet::new(), Vec::new())
    } else {
        match check::load(&args.files, err) {
            Ok(loaded) => loaded,
            Err(exit) => return exit,
        }
    };
    // A policy with errors cannot be trusted to say what its hops are; its warnings are about
    // other stanzas, and `policy check`'s to report.
    let report = set.check();
    if report.has_errors() {
        render::human_all(&report.all(), set.sources(), render::CHECK_JSON, err);
        let _ = writeln!(
            err,
            "policy locality: {}; fix the errors first",
            render::summary(&report)
        );
        return Exit::Problems;
    }
    let locality = set.spec().locality.as_ref();
    if args.check && locality.is_none() {
        let _ = writeln!(
            err,
            "error: the policy declares no hops to check\n  help: add a `locality` stanza, such as `locality {{ database = blocking env DATABASE_URL }}`"
        );
        return Exit::Problems;
    }

    let map = environment.map();
    let assessed: Vec<Assessed<'_>> = locality
        .map(|locality| {
            locality
                .hops
                .iter()
                .map(|hop| assess(&map, &environment, hop))
                .collect()
        })
        .unwrap_or_default();
    let findings = Report::from_diagnostics(if args.check {
        assessed.iter().filter_map(judge).collect()
    } else {
        Vec::new()
    });

    match args.format {
        Format::Human => {
            let _ = write!(out, "{map}");
            if !files.is_empty() {
                let _ = writeln!(out);
                if locality.is_none() {
                    let _ = writeln!(out, "(no hops: the policy has no `locality` stanza)");
                }
                let _ = write!(out, "{}", hops_table(&assessed));
            }
            if args.check {
                render::human_all(
                    &findings.all(),
                    set.sources(),
                    "policy locality --check --format json",
                    err,
                );
                let _ = writeln!(
                    err,
                    "policy locality: {} in {}",
                    render::summary(&findings),
                    render::plural(assessed.len(), "hop"),
                );
            }
        }
        Format::Json => {
            // The probe's own JSON (what a service's dashboard serves), with the hops added.
            let mut document = json!(map);
            if let Some(object) = document.as_object_mut() {
                object.insert(
                    "files".to_owned(),
                    json!(
                        files
                            .iter()
                            .map(|file| file.display().to_string())
                            .collect::<Vec<_>>()
                    ),
                );
                object.insert(
                    "hops".to_owned(),
                    assessed.iter().map(hop_json).collect::<Vec<_>>().into(),
                );
                if args.check {
                    object.insert("errors".to_owned(), findings.errors.len().into());
                    object.insert("warnings".to_owned(), findings.warnings.len().into());
                    object.insert(
                        "diagnostics".to_owned(),
                        findings
                            .all()
                            .into_iter()
                            .map(|diagnostic| render::json(diagnostic, set.sources()))
                            .collect::<Vec<_>>()
                            .into(),
                    );
                }
            }
            let _ = writeln!(out, "{document:#}");
        }
    }
    if findings.has_errors() {
        Exit::Problems
    } else {
        Exit::Clean
    }
}
