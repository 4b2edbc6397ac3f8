//! The `quarantine` stanzas: where a heavy crate stands in a package's default build and in
//! the build with the feature it must stay behind, who depends on it directly, and what the
//! feature adds.

use std::collections::BTreeSet;
use std::io::Write;

use serde_json::{Value, json};
use velocity_policy_lang::{QuarantineSpec, suggest};

use super::graph::{Build, Workspace};
use super::problem::{GateError, Problem};
use super::{Gate, plural, ratchet};

/// One checked quarantine.
#[derive(Debug)]
pub(super) struct Checked {
    name: String,
    package: String,
    behind: String,
    in_default: bool,
    tree: Option<String>,
    justification: Option<String>,
    adds: Vec<String>,
    rlib: (u64, usize),
    /// In the default build without a justification, or depended on outside `only`.
    pub(super) broken: bool,
}

/// The quarantined crate (every package of that name) in the two builds of a package.
struct Exposure<'a> {
    package: usize,
    behind: &'a str,
    default: Build,
    with_feature: Build,
    /// Its packages in the default build.
    in_default: Vec<usize>,
    /// Its packages in the build with the feature.
    in_feature: Vec<usize>,
}

impl Gate<'_> {
    /// Checks one quarantine; `None` (with a problem) when its package, feature or crate is not
    /// in the graph.
    pub(super) fn quarantine(&mut self, quarantine: &QuarantineSpec) -> Option<Checked> {
        let package = self.member(&quarantine.package.value, quarantine.package.loc)?;
        let Some(Ok(workspace)) = &self.workspace else {
            return None;
        };
        if let Some(guarded) = &quarantine.feature {
            let checked = feature(workspace, package, quarantine).and_then(|behind| {
                checked_feature(workspace, package, behind, guarded, quarantine)
            });
            return match checked {
                Ok((checked, problems)) => {
                    self.problems.extend(problems);
                    Some(checked)
                }
                Err(problem) => {
                    self.problems.push(problem);
                    None
                }
            };
        }
        let found = feature(workspace, package, quarantine)
            .and_then(|behind| Ok((behind, crates(workspace, quarantine)?)));
        let (behind, crates) = match found {
            Ok(found) => found,
            Err(problem) => {
                self.problems.push(problem);
                return None;
            }
        };
        let exposure = Exposure::of(workspace, package, behind, &crates);
        let outside = exposure.outside_only(workspace, quarantine);
        let broken =
            !outside.is_empty() || (exposure.is_in_default() && quarantine.justification.is_none());
        self.problems.extend(outside);
        self.problems
            .extend(exposure.placement_problems(workspace, quarantine));
        Some(exposure.checked(workspace, quarantine, broken))
    }
}

/// The feature the crate must stay behind, which `package` must have.
fn feature<'q>(
    workspace: &Workspace,
    package: usize,
    quarantine: &'q QuarantineSpec,
) -> Result<&'q str, Problem> {
    let behind = quarantine.behind.value.as_str();
    let features = workspace.features(package);
    if features.contains(&behind) {
        return Ok(behind);
    }
    let help = suggest::did_you_mean(
        behind,
        features.iter().copied(),
        &format!("the features of `{}`", quarantine.package.value),
        &format!("`{}` has no features", quarantine.package.value),
    );
    let error = GateError::UnknownFeature {
        package: quarantine.package.value.clone(),
        feature: behind.to_owned(),
        help,
    };
    Err(Problem::at(error, quarantine.behind.loc, "no such feature"))
}

/// A quarantined feature (`feature = "velocity-policy-runtime/chaos"`): the default build of `package`
/// must not turn it on, and the build with `behind` must.
fn checked_feature(
    workspace: &Workspace,
    package: usize,
    behind: &str,
    guarded: &velocity_policy_lang::Located<String>,
    quarantine: &QuarantineSpec,
) -> Result<(Checked, Vec<Problem>), Problem> {
    let (owner, name) = guarded
        .value
        .split_once('/')
        .unwrap_or((guarded.value.as_str(), ""));
    let owners = workspace.packages_named(owner);
    let Some(&first) = owners.first() else {
        let names = workspace.package_names();
        let help = suggest::did_you_mean(owner, names.iter().copied(), "the crates", "");
        return Err(Problem::at(
            GateError::UnknownCrate {
                name: owner.to_owned(),
                help,
            },
            guarded.loc,
            "not in the graph",
        ));
    };
    if !workspace.features(first).contains(&name) {
        let help = suggest::did_you_mean(
            name,
            workspace.features(first).iter().copied(),
            &format!("the features of `{owner}`"),
            &format!("`{owner}` has no features"),
        );
        return Err(Problem::at(
            GateError::UnknownFeature {
                package: owner.to_owned(),
                feature: name.to_owned(),
                help,
            },
            guarded.loc,
            "no such feature",
        ));
    }
    let default = workspace.build(package, &[]);
    let with_feature = workspace.build(package, &[behind]);
    let on = |build: &Build| owners.iter().any(|&o| workspace.feature_on(build, o, name));
    let (in_default, in_feature) = (on(&default), on(&with_feature));
    let package_name = workspace.name(package).to_owned();
    let mut problems = Vec::new();
    if !in_feature {
        problems.push(Problem::at(
            GateError::NotBehindFeature {
                name: guarded.value.clone(),
                package: package_name.clone(),
                behind: behind.to_owned(),
            },
            quarantine.behind.loc,
            "does not turn it on",
        ));
    }
    let broken = in_default && quarantine.justification.is_none();
    if broken {
        problems.push(
            Problem::at(
                GateError::QuarantinedFeatureOn {
                    feature: guarded.value.clone(),
                    package: package_name.clone(),
                    behind: behind.to_owned(),
                },
                guarded.loc,
                "quarantined here",
            )
            .with_label(quarantine.package.loc, "in this package's default build"),
        );
    }
    let (added, adds) = added_crates(workspace, &default, &with_feature);
    let checked = Checked {
        name: format!("{} (feature `{}`)", quarantine.name.value, guarded.value),
        package: package_name,
        behind: behind.to_owned(),
        in_default,
        tree: in_default
            .then(|| format!("  feature `{}` is on in the default build\n", guarded.value)),
        justification: quarantine.justification.as_ref().map(|j| j.value.clone()),
        adds,
        rlib: workspace.rlib_bytes(&added),
        broken,
    };
    Ok((checked, problems))
}

/// Every package of the quarantined crate's name; some feature of the workspace must bring one
/// in.
fn crates(workspace: &Workspace, quarantine: &QuarantineSpec) -> Result<Vec<usize>, Problem> {
    let name = &quarantine.crate_name().value;
    let crates = workspace.packages_named(name);
    if !crates.is_empty() {
        return Ok(crates);
    }
    let names = workspace.package_names();
    let help = suggest::did_you_mean(name, names.iter().copied(), "the crates", "");
    let help = if help.starts_with("did you mean") {
        help
    } else {
        "no feature of any workspace member depends on it: check the name".to_owned()
    };
    let error = GateError::UnknownCrate {
        name: name.clone(),
        help,
    };
    Err(Problem::at(error, quarantine.name.loc, "not in the graph"))
}

impl<'a> Exposure<'a> {
    fn of(workspace: &Workspace, package: usize, behind: &'a str, crates: &[usize]) -> Self {
        let default = workspace.build(package, &[]);
        let with_feature = workspace.build(package, &[behind]);
        let within = |build: &Build| -> Vec<usize> {
            crates
                .iter()
                .copied()
                .filter(|&c| build.contains(c))
                .collect()
        };
        Exposure {
            package,
            behind,
            in_default: within(&default),
            in_feature: within(&with_feature),
            default,
            with_feature,
        }
    }

    fn is_in_default(&self) -> bool {
        !self.in_default.is_empty()
    }

    /// A direct dependent outside the stanza's `only` list, each a problem.
    fn outside_only(&self, workspace: &Workspace, quarantine: &QuarantineSpec) -> Vec<Problem> {
        if quarantine.only.is_empty() {
            return Vec::new();
        }
        let allowed_names: Vec<String> = quarantine
            .only
            .iter()
            .map(|name| name.value.replace('-', "_"))
            .collect();
        let mut found = Vec::new();
        for &c in &self.in_feature {
            for dependent in self.with_feature.dependents(c) {
                let name = workspace.name(dependent);
                if !allowed_names.contains(&name.replace('-', "_")) {
                    found.push((name.to_owned(), workspace.name(c).to_owned()));
                }
            }
        }
        let allowed = quarantine
            .only
            .iter()
            .map(|name| format!("`{}`", name.value))
            .collect::<Vec<_>>()
            .join(" or ");
        let loc = quarantine
            .only
            .first()
            .map_or(quarantine.name.loc, |only| only.loc);
        found
            .into_iter()
            .map(|(dependent, name)| {
                Problem::at(
                    GateError::NotInOnly {
                        name,
                        dependent,
                        allowed: allowed.clone(),
                    },
                    loc,
                    "the only direct dependents allowed",
                )
            })
            .collect()
    }

    /// In neither build (the feature does not bring it in), or in the default build without a
    /// justification.
    fn placement_problems(
        &self,
        workspace: &Workspace,
        quarantine: &QuarantineSpec,
    ) -> Vec<Problem> {
        let name = quarantine.crate_name().value.clone();
        let package = workspace.name(self.package).to_owned();
        let mut problems = Vec::new();
        if self.in_default.is_empty() && self.in_feature.is_empty() {
            problems.push(Problem::at(
                GateError::NotBehindFeature {
                    name: name.clone(),
                    package: package.clone(),
                    behind: self.behind.to_owned(),
                },
                quarantine.behind.loc,
                "does not bring it in",
            ));
        }
        if self.is_in_default() && quarantine.justification.is_none() {
            problems.push(
                Problem::at(
                    GateError::QuarantineBroken {
                        name,
                        package,
                        behind: self.behind.to_owned(),
                    },
                    quarantine.name.loc,
                    "quarantined here",
                )
                .with_label(quarantine.package.loc, "in this package's default build"),
            );
        }
        problems
    }

    /// What the gate reports of it: the chains that pull it into the default build, and what
    /// the feature adds.
    fn checked(&self, workspace: &Workspace, quarantine: &QuarantineSpec, broken: bool) -> Checked {
        let tree = self.is_in_default().then(|| {
            self.in_default
                .iter()
                .map(|&c| self.default.inverted_tree(workspace, c))
                .collect::<Vec<_>>()
                .join("\n")
        });
        let (added, adds) = added_crates(workspace, &self.default, &self.with_feature);
        Checked {
            // The stanza's label, and the crate when a label names another.
            name: match &quarantine.krate {
                Some(krate) => format!("{} (crate `{}`)", quarantine.name.value, krate.value),
                None => quarantine.name.value.clone(),
            },
            package: workspace.name(self.package).to_owned(),
            behind: self.behind.to_owned(),
            in_default: self.is_in_default(),
            tree,
            justification: quarantine.justification.as_ref().map(|j| j.value.clone()),
            adds,
            rlib: workspace.rlib_bytes(&added),
            broken,
        }
    }
}

pub(super) fn checked_json(checked: &Checked) -> Value {
    json!({
        "crate": checked.name,
        "package": checked.package,
        "behind": checked.behind,
        "in_default_build": checked.in_default,
        "justification": checked.justification,
        "tree": checked.tree,
        "feature_adds": checked.adds,
        "feature_adds_rlib_bytes": checked.rlib.0,
        "feature_adds_built": checked.rlib.1,
        "broken": checked.broken,
    })
}

pub(super) fn print_quarantines(out: &mut dyn Write, checked: &[Checked]) {
    for c in checked {
        let state = match (&c.tree, &c.justification) {
            (None, _) => "not in the default build".to_owned(),
            (Some(_), None) => "IN THE DEFAULT BUILD".to_owned(),
            (Some(_), Some(why)) => format!("in the default build, justified: {why}"),
        };
        let _ = writeln!(
            out,
            "quarantine {} (package `{}`, behind `{}`): {state}",
            c.name, c.package, c.behind
        );
        if let Some(tree) = &c.tree {
            let _ = write!(out, "{tree}");
        }
        let _ = writeln!(out, "{}", adds_line(c));
        let _ = writeln!(out);
    }
}

/// `feature `x` adds N crates: ...`, with their compiled size where they were built.
fn adds_line(c: &Checked) -> String {
    if c.adds.is_empty() {
        return format!(
            "  feature `{}` adds no crate to the default build",
            c.behind
        );
    }
    let mut line = format!(
        "  feature `{}` adds {}: {}",
        c.behind,
        plural(c.adds.len(), "crate", "crates"),
        c.adds.join(", ")
    );
    let (bytes, built) = c.rlib;
    if built > 0 {
        line.push_str(&format!(
            " ({} of compiled rlibs, {built} of {} built)",
            ratchet::shown(bytes, Some("kb")),
            c.adds.len()
        ));
    }
    line
}

/// The crates `with_feature` builds that `default` does not: their packages, and their names
/// sorted.
fn added_crates(
    workspace: &Workspace,
    default: &Build,
    with_feature: &Build,
) -> (BTreeSet<usize>, Vec<String>) {
    let added: BTreeSet<usize> = with_feature
        .packages()
        .difference(default.packages())
        .copied()
        .collect();
    let mut names: Vec<String> = added
        .iter()
        .map(|&p| workspace.name(p).to_owned())
        .collect();
    names.sort();
    (added, names)
}
