//! `policy gate FILE... [--ratchet]`: size and count ceilings with a ratchet, and quarantined
//! heavy crates.
//!
//! The question is not "how big is this feature" but "did this capability make everything
//! else heavier?". Each line of a `ceilings` stanza is measured and compared with its ceiling; each
//! `quarantine` resolves the named package's default build and fails when the crate is in it,
//! printing the chain that pulls it in (as `cargo tree -i CRATE -e normal` draws it), unless
//! a `justification` allows it. With the feature on, it reports what the capability adds.
//!
//! Paths in the policy (`dir`, binaries, globs) are relative to `--root` (default: the
//! current directory), where `cargo metadata` also runs. Exit codes: 0 within every ceiling, 1
//! over a ceiling or a quarantine broken, 2 when something could not be measured (the gate's own
//! diagnostics, `policy::gate::...`, are listed in [`problem`]).
//!
//! One module per kind of measurement ([`web`] for a front-end build, [`graph`] for Cargo's
//! dependency graph, [`artifact`] for binaries and globs), so that other checks of a build
//! (the asset audit) can join the gate as modules of their own.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

use policy_lang::{Ceiling, Loc, Metric, QuarantineSpec, suggest};
use serde_json::{Value, json};

use crate::{Exit, Format, check, render};

pub mod artifact;
pub mod graph;
pub mod imports;
pub mod platform;
pub mod problem;
pub mod ratchet;
pub mod web;

use artifact::ArtifactError;
use graph::Workspace;
use problem::{GateError, Problem};

/// Arguments of `policy gate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Policy files, or directories whose `*.policy` files are read.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Lower each ceiling toward `measured × (1 + headroom)` where the measurement allows it
    /// (never raising one), rewriting the numbers in the files in place.
    #[arg(long)]
    pub ratchet: bool,
    /// The directory the policy's paths are relative to, and where `cargo metadata` runs.
    #[arg(long, default_value = ".")]
    pub root: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// One measured ceiling.
#[derive(Debug)]
struct Row {
    /// The name of its `ceilings` stanza.
    stanza: String,
    label: String,
    unit: Option<String>,
    ceiling: u64,
    measured: Option<u64>,
    lowered: Option<ratchet::Lowered>,
}

impl Row {
    fn over(&self) -> bool {
        self.measured
            .is_some_and(|measured| measured > self.ceiling)
    }
}

/// One checked quarantine.
#[derive(Debug)]
struct Checked {
    name: String,
    package: String,
    behind: String,
    in_default: bool,
    tree: Option<String>,
    justification: Option<String>,
    adds: Vec<String>,
    rlib: (u64, usize),
    /// In the default build without a justification, or depended on outside `only`.
    broken: bool,
}

struct Gate<'a> {
    root: &'a Path,
    workspace: Option<Result<Workspace, String>>,
    metadata_reported: bool,
    sites: HashMap<String, Result<web::Site, String>>,
    problems: Vec<Problem>,
}

fn size_text(value: u64, unit: Option<&str>) -> String {
    ratchet::shown(value, unit)
}

impl Gate<'_> {
    fn workspace(&mut self, loc: Loc) -> Option<&Workspace> {
        let root = self.root;
        let loaded = self
            .workspace
            .get_or_insert_with(|| Workspace::load(root).map_err(|error| error.0));
        match loaded {
            Ok(workspace) => Some(workspace),
            Err(output) => {
                if !self.metadata_reported {
                    self.metadata_reported = true;
                    self.problems.push(Problem::at(
                        GateError::CargoMetadata {
                            root: root.display().to_string(),
                            output: output.clone(),
                        },
                        loc,
                        "needs the dependency graph",
                    ));
                }
                None
            }
        }
    }

    fn member(&mut self, package: &str, loc: Loc) -> Option<usize> {
        let root = self.root.display().to_string();
        let workspace = self.workspace(loc)?;
        if let Some(index) = workspace.member(package) {
            return Some(index);
        }
        let help = suggest::did_you_mean(
            package,
            workspace.member_names(),
            "the workspace's packages",
            "the workspace has no packages",
        );
        self.problems.push(Problem::at(
            GateError::UnknownPackage {
                package: package.to_owned(),
                root,
                help,
            },
            loc,
            "not a package of the workspace",
        ));
        None
    }

    fn site(&mut self, dir: &policy_lang::Located<String>) -> Option<&web::Site> {
        let root = self.root;
        let path = root.join(&dir.value);
        let site = self.sites.entry(dir.value.clone()).or_insert_with(|| {
            if !path.is_dir() {
                return Err(String::new());
            }
            web::Site::read(&path).map_err(|error| error.to_string())
        });
        match site {
            Ok(site) => Some(site),
            Err(_) => None,
        }
    }

    /// Reads a `ceilings` stanza's folder once, reporting why it cannot be read.
    fn open_site(&mut self, dir: &policy_lang::Located<String>) -> bool {
        if self.sites.contains_key(&dir.value) {
            return self.site(dir).is_some();
        }
        let path = self.root.join(&dir.value);
        let ok = self.site(dir).is_some();
        if !ok {
            let error = if path.is_dir() {
                let reason = match self.sites.get(&dir.value) {
                    Some(Err(reason)) => reason.clone(),
                    _ => String::new(),
                };
                GateError::Unreadable {
                    path: path.display().to_string(),
                    reason,
                }
            } else {
                GateError::MissingDir {
                    dir: dir.value.clone(),
                    root: self.root.display().to_string(),
                }
            };
            self.problems
                .push(Problem::at(error, dir.loc, "this folder"));
        } else if let Some(site) = self.site(dir)
            && let Some(first) = site.unresolved.first()
        {
            let error = GateError::UnresolvedReference {
                dir: dir.value.clone(),
                count: site.unresolved.len(),
                example: first.reference.clone(),
                from: first.from.clone(),
            };
            self.problems.push(Problem::at(error, dir.loc, "read here"));
        }
        ok
    }

    fn artifact_problem(&mut self, ceiling: &Ceiling, target: &str, error: ArtifactError) {
        let loc = ceiling.metric.loc;
        let error = match error {
            ArtifactError::Missing => {
                let name = Path::new(target)
                    .file_stem()
                    .map_or_else(|| target.to_owned(), |s| s.to_string_lossy().into_owned());
                let release = Path::new(target)
                    .components()
                    .any(|c| c.as_os_str() == "release");
                GateError::MissingArtifact {
                    path: target.to_owned(),
                    command: format!(
                        "cargo build{} --bin {name}",
                        if release { " --release" } else { "" }
                    ),
                }
            }
            ArtifactError::Unreadable(reason) => GateError::Unreadable {
                path: target.to_owned(),
                reason,
            },
            ArtifactError::NotABinary(reason) => GateError::NotABinary {
                path: target.to_owned(),
                reason,
            },
            ArtifactError::BadPattern(reason) => GateError::NoFiles {
                pattern: target.to_owned(),
                help: format!("it is not a glob ({reason}): write one like `web/dist/**/*.wasm`"),
            },
            ArtifactError::NoMatch => GateError::NoFiles {
                pattern: target.to_owned(),
                help: format!(
                    "build what it should match first, or fix the glob (it is relative to `{}`)",
                    self.root.display()
                ),
            },
        };
        self.problems.push(Problem::at(error, loc, "measured here"));
    }

    /// The value of one ceiling's metric, or `None` (with a problem) when it cannot be measured.
    fn measure(
        &mut self,
        dir: Option<&policy_lang::Located<String>>,
        ceiling: &Ceiling,
    ) -> Option<u64> {
        let root = self.root;
        match &ceiling.metric.value {
            Metric::Web(metric) => {
                let dir = dir?;
                if !self.open_site(dir) {
                    return None;
                }
                let value = self.site(dir)?.measure(*metric, ceiling.compression);
                if value.is_none() {
                    self.problems.push(Problem::at(
                        GateError::NoDocuments {
                            dir: dir.value.clone(),
                        },
                        dir.loc,
                        "this folder",
                    ));
                }
                value
            }
            Metric::Binary(path) => match artifact::binary_size(&root.join(path)) {
                Ok(size) => Some(size),
                Err(error) => {
                    self.artifact_problem(ceiling, path, error);
                    None
                }
            },
            Metric::BinaryCode(path) => match artifact::code_size(&root.join(path)) {
                Ok(size) => Some(size),
                Err(error) => {
                    self.artifact_problem(ceiling, path, error);
                    None
                }
            },
            Metric::Files(pattern) => match artifact::glob_size(root, pattern, ceiling.compression)
            {
                Ok((size, _)) => Some(size),
                Err(error) => {
                    self.artifact_problem(ceiling, pattern, error);
                    None
                }
            },
            Metric::Crates(package) => {
                let index = self.member(package, ceiling.metric.loc)?;
                let workspace = self.workspace(ceiling.metric.loc)?;
                Some(workspace.build(index, &[]).packages().len() as u64)
            }
            _ => None,
        }
    }

    fn quarantine(&mut self, quarantine: &QuarantineSpec) -> Option<Checked> {
        let package = self.member(&quarantine.package.value, quarantine.package.loc)?;
        let workspace = self.workspace(quarantine.package.loc)?;
        let behind = quarantine.behind.value.as_str();
        let features = workspace.features(package);
        if !features.contains(&behind) {
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
            self.problems
                .push(Problem::at(error, quarantine.behind.loc, "no such feature"));
            return None;
        }
        let crates = workspace.packages_named(&quarantine.crate_name().value);
        if crates.is_empty() {
            let names = workspace.package_names();
            let help = suggest::did_you_mean(
                &quarantine.crate_name().value,
                names.iter().copied(),
                "the crates",
                "",
            );
            let help = if help.starts_with("did you mean") {
                help
            } else {
                "no feature of any workspace member depends on it: check the name".to_owned()
            };
            let error = GateError::UnknownCrate {
                name: quarantine.crate_name().value.clone(),
                help,
            };
            self.problems
                .push(Problem::at(error, quarantine.name.loc, "not in the graph"));
            return None;
        }
        let default = workspace.build(package, &[]);
        let with_feature = workspace.build(package, &[behind]);
        let in_default: Vec<usize> = crates
            .iter()
            .copied()
            .filter(|&c| default.contains(c))
            .collect();
        let in_feature: Vec<usize> = crates
            .iter()
            .copied()
            .filter(|&c| with_feature.contains(c))
            .collect();
        let tree = (!in_default.is_empty()).then(|| {
            in_default
                .iter()
                .map(|&c| default.inverted_tree(workspace, c))
                .collect::<Vec<_>>()
                .join("\n")
        });
        let added: BTreeSet<usize> = with_feature
            .packages()
            .difference(default.packages())
            .copied()
            .collect();
        let mut adds: Vec<String> = added
            .iter()
            .map(|&p| workspace.name(p).to_owned())
            .collect();
        adds.sort();
        let rlib = workspace.rlib_bytes(&added);
        let package_name = workspace.name(package).to_owned();
        let mut found = Vec::new();
        if !quarantine.only.is_empty() {
            let allowed: Vec<String> = quarantine
                .only
                .iter()
                .map(|name| name.value.replace('-', "_"))
                .collect();
            for &c in &in_feature {
                for dependent in with_feature.dependents(c) {
                    let name = workspace.name(dependent);
                    if !allowed.contains(&name.replace('-', "_")) {
                        found.push((name.to_owned(), workspace.name(c).to_owned()));
                    }
                }
            }
        }
        let mut broken = !found.is_empty();
        for (dependent, name) in found {
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
            self.problems.push(Problem::at(
                GateError::NotInOnly {
                    name,
                    dependent,
                    allowed,
                },
                loc,
                "the only direct dependents allowed",
            ));
        }
        if in_default.is_empty() && in_feature.is_empty() {
            self.problems.push(Problem::at(
                GateError::NotBehindFeature {
                    name: quarantine.crate_name().value.clone(),
                    package: package_name.clone(),
                    behind: behind.to_owned(),
                },
                quarantine.behind.loc,
                "does not bring it in",
            ));
        }
        if !in_default.is_empty() && quarantine.justification.is_none() {
            broken = true;
            self.problems.push(
                Problem::at(
                    GateError::QuarantineBroken {
                        name: quarantine.crate_name().value.clone(),
                        package: package_name.clone(),
                        behind: behind.to_owned(),
                    },
                    quarantine.name.loc,
                    "quarantined here",
                )
                .with_label(quarantine.package.loc, "in this package's default build"),
            );
        }
        Some(Checked {
            // The stanza's label, and the crate when a label names another.
            name: match &quarantine.krate {
                Some(krate) => format!("{} (crate `{}`)", quarantine.name.value, krate.value),
                None => quarantine.name.value.clone(),
            },
            package: package_name,
            behind: behind.to_owned(),
            in_default: !in_default.is_empty(),
            tree,
            justification: quarantine.justification.as_ref().map(|j| j.value.clone()),
            adds,
            rlib,
            broken,
        })
    }
}

impl Problem {
    fn with_label(mut self, loc: Loc, text: &str) -> Self {
        self.labels.push(policy_lang::Label {
            loc,
            text: text.to_owned(),
        });
        self
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Runs `policy gate`.
pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    let (set, files) = match check::load_valid(&args.files, "policy gate: ", err) {
        Ok(loaded) => loaded,
        Err(exit) => return exit,
    };
    let mut gate = Gate {
        root: &args.root,
        workspace: None,
        metadata_reported: false,
        sites: HashMap::new(),
        problems: Vec::new(),
    };
    let spec = set.spec();
    let mut rows = Vec::new();
    let mut edits: BTreeMap<usize, Vec<(std::ops::Range<usize>, String)>> = BTreeMap::new();
    for stanza in &spec.ceilings {
        for ceiling in &stanza.lines {
            let measured = gate.measure(stanza.dir.as_ref(), ceiling);
            let lowered = measured.and_then(|m| ratchet::ratchet(ceiling, m));
            if args.ratchet
                && let Some(lowered) = &lowered
            {
                for (loc, text) in [
                    (ceiling.at_most.loc, &lowered.ceiling),
                    (ceiling.measured.loc, &lowered.measured),
                ] {
                    if let (Some(source), Some(range)) = (loc.source(), loc.range()) {
                        edits
                            .entry(source.index())
                            .or_default()
                            .push((range, text.clone()));
                    }
                }
            }
            let row = Row {
                stanza: stanza.name.value.clone(),
                label: ceiling.label(),
                unit: ceiling.at_most.value.unit.clone(),
                ceiling: ceiling.at_most.value.value,
                measured,
                lowered: if args.ratchet { lowered } else { None },
            };
            if row.over() {
                let unit = row.unit.as_deref();
                gate.problems.push(Problem::at(
                    GateError::OverCeiling {
                        metric: row.label.clone(),
                        measured: size_text(measured.unwrap_or(0), unit),
                        ceiling: size_text(row.ceiling, unit),
                    },
                    ceiling.at_most.loc,
                    "the ceiling",
                ));
            }
            rows.push(row);
        }
    }
    let mut checked = Vec::new();
    for quarantine in &spec.quarantines {
        if let Some(result) = gate.quarantine(quarantine) {
            checked.push(result);
        }
    }
    // The asset audit (`policy assets`) for every `assets` stanza that names its folder.
    let mut audits = Vec::new();
    let mut audit_exit = Exit::Clean;
    for stanza in &spec.assets {
        let Some(dir) = &stanza.dir else { continue };
        let base = stanza
            .loc
            .source()
            .and_then(|source| set.sources().get(source))
            .and_then(|file| Path::new(file.name()).parent().map(Path::to_path_buf))
            .unwrap_or_default();
        let folder = base.join(&dir.value);
        match crate::assets::audit(&folder, stanza) {
            Ok(report) if report.documents == 0 => {
                let _ = writeln!(
                    err,
                    "error: no `.html` documents under `{}` (the `dir` of `assets {}`)\n  help: build the front end first, and point `dir` at its output",
                    folder.display(),
                    stanza.name.value
                );
                audit_exit = Exit::Usage;
            }
            Ok(report) => {
                if !report.is_clean() && audit_exit == Exit::Clean {
                    audit_exit = Exit::Problems;
                }
                audits.push((stanza.name.value.clone(), folder, report));
            }
            Err(error) => {
                let _ = writeln!(err, "{}", crate::files::io_error(&folder, &error));
                audit_exit = Exit::Usage;
            }
        }
    }
    let exit = gate
        .problems
        .iter()
        .map(Problem::exit)
        .fold(Exit::Clean, |worst, exit| match (worst, exit) {
            (Exit::Usage, _) | (_, Exit::Usage) => Exit::Usage,
            (Exit::Problems, _) | (_, Exit::Problems) => Exit::Problems,
            _ => Exit::Clean,
        });
    let exit = match (exit, audit_exit) {
        (Exit::Usage, _) | (_, Exit::Usage) => Exit::Usage,
        (Exit::Problems, _) | (_, Exit::Problems) => Exit::Problems,
        _ => Exit::Clean,
    };
    let mut rewritten = Vec::new();
    if args.ratchet && exit != Exit::Usage {
        for (index, edits) in edits {
            let (Some(path), Some((_, file))) = (files.get(index), set.sources().iter().nth(index))
            else {
                continue;
            };
            let text = ratchet::rewrite(file.text(), edits);
            if let Err(error) = std::fs::write(path, text) {
                let _ = writeln!(err, "error: cannot write `{}`: {error}", path.display());
                return Exit::Usage;
            }
            rewritten.push(path.display().to_string());
        }
    }
    let lowered = rows.iter().filter(|row| row.lowered.is_some()).count();
    match args.format {
        Format::Human => {
            print_ceilings(out, &rows);
            print_quarantines(out, &checked);
            for problem in &gate.problems {
                let _ = writeln!(err, "{}", problem.human(set.sources()));
            }
            for (name, folder, report) in &audits {
                for finding in &report.findings {
                    let _ = writeln!(err, "{}", render::human_of(&report.renderable(finding)));
                }
                let _ = writeln!(
                    out,
                    "assets {name}: {} in {} under `{}`",
                    render::plural(report.findings.len(), "finding"),
                    render::plural(report.documents, "document"),
                    folder.display()
                );
            }
            let over = rows.iter().filter(|row| row.over()).count();
            let broken = checked.iter().filter(|c| c.broken).count();
            let findings: usize = audits.iter().map(|(_, _, r)| r.findings.len()).sum();
            let mut summary = format!(
                "policy gate: {}, {over} over; {}, {broken} broken; {}, {findings} asset findings",
                plural(rows.len(), "ceiling", "ceilings"),
                plural(checked.len(), "quarantine", "quarantines"),
                plural(audits.len(), "asset audit", "asset audits"),
            );
            if args.ratchet {
                if exit == Exit::Usage {
                    summary.push_str("; nothing ratcheted: fix the errors first");
                } else {
                    summary.push_str(&format!(
                        "; {} lowered",
                        plural(lowered, "ceiling", "ceilings")
                    ));
                }
            }
            let _ = writeln!(err, "{summary}");
        }
        Format::Json => {
            let document = json!({
                "files": files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
                "pass": exit == Exit::Clean,
                "ceilings": rows.iter().map(row_json).collect::<Vec<_>>(),
                "quarantines": checked.iter().map(checked_json).collect::<Vec<_>>(),
                "assets": audits.iter().map(|(name, folder, report)| json!({
                    "name": name,
                    "folder": folder.display().to_string(),
                    "report": report.to_json(),
                })).collect::<Vec<_>>(),
                "rewritten": rewritten,
                "diagnostics": gate.problems.iter().map(|p| p.json(set.sources())).collect::<Vec<_>>(),
            });
            let _ = writeln!(out, "{document:#}");
        }
    }
    exit
}

fn row_json(row: &Row) -> Value {
    json!({
        "stanza": row.stanza,
        "metric": row.label,
        "unit": row.unit.as_deref().unwrap_or("crates"),
        "measured": row.measured,
        "ceiling": row.ceiling,
        "headroom_left": row.measured.map(|m| {
            i64::try_from(row.ceiling).unwrap_or(i64::MAX) - i64::try_from(m).unwrap_or(i64::MAX)
        }),
        "over": row.over(),
        "lowered_to": row.lowered.as_ref().map(|l| l.ceiling.clone()),
    })
}

fn checked_json(checked: &Checked) -> Value {
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

fn print_ceilings(out: &mut dyn Write, rows: &[Row]) {
    let mut stanzas: Vec<&str> = Vec::new();
    for row in rows {
        if !stanzas.contains(&row.stanza.as_str()) {
            stanzas.push(&row.stanza);
        }
    }
    let cells = |row: &Row| -> [String; 4] {
        let unit = row.unit.as_deref();
        let left = match row.measured {
            None => "-".to_owned(),
            Some(measured) if measured > row.ceiling => {
                format!("over by {}", size_text(measured - row.ceiling, unit))
            }
            Some(measured) => {
                let left = row.ceiling - measured;
                #[expect(clippy::cast_precision_loss, reason = "a percentage to one decimal")]
                let percent = if row.ceiling == 0 {
                    0.0
                } else {
                    left as f64 * 100.0 / row.ceiling as f64
                };
                format!("{} ({percent:.1}%)", size_text(left, unit))
            }
        };
        [
            row.label.clone(),
            row.measured
                .map_or_else(|| "-".to_owned(), |m| size_text(m, unit)),
            size_text(row.ceiling, unit),
            left,
        ]
    };
    let header = ["metric", "measured", "ceiling", "headroom left"].map(str::to_owned);
    let all: Vec<[String; 4]> = rows.iter().map(cells).collect();
    let mut widths = header.each_ref().map(|h| h.chars().count());
    for cells in &all {
        for (width, cell) in widths.iter_mut().zip(cells) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: &[String; 4]| {
        format!(
            "  {:<w0$}  {:>w1$}  {:>w2$}  {}",
            cells[0],
            cells[1],
            cells[2],
            cells[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
        )
    };
    for stanza in stanzas {
        let _ = writeln!(out, "ceilings {stanza}");
        let _ = writeln!(out, "{}", line(&header).trim_end());
        for (row, cells) in rows.iter().zip(&all) {
            if row.stanza == stanza {
                let _ = writeln!(out, "{}", line(cells).trim_end());
                if let Some(lowered) = &row.lowered {
                    let _ = writeln!(
                        out,
                        "    ratcheted: at most {}, measured {}",
                        lowered.ceiling, lowered.measured
                    );
                }
            }
        }
        let _ = writeln!(out);
    }
}

fn print_quarantines(out: &mut dyn Write, checked: &[Checked]) {
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
        if c.adds.is_empty() {
            let _ = writeln!(
                out,
                "  feature `{}` adds no crate to the default build",
                c.behind
            );
        } else {
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
                    size_text(bytes, Some("kb")),
                    c.adds.len()
                ));
            }
            let _ = writeln!(out, "{line}");
        }
        let _ = writeln!(out);
    }
}
