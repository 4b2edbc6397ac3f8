//! The dependency graph of a package's build, as Cargo resolves it.
//!
//! `cargo metadata --all-features` gives every package, every declared dependency and the
//! lock file's resolution, with every optional edge that some feature could turn on. From that,
//! `Workspace::build` activates features the way Cargo does (`default`, `dep:NAME`,
//! `NAME/FEATURE`, `NAME?/FEATURE`, each dependency's `features` and `default-features`) until
//! nothing more turns on, starting from one package with its default features (and any extra
//! ones). Each declaration's `cfg(...)` is evaluated for the host ([`super::platform`]). Only
//! normal dependencies count: dev dependencies are not in the build and build scripts'
//! dependencies are not in the binary, as `cargo tree -e normal` shows it. Features are
//! unified across the build; Cargo's resolver 2 resolves proc macros' own dependencies apart,
//! which can make its build smaller in rare cases, never bring in a crate the unified one
//! lacks.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

use super::platform::Platform;

#[derive(Debug, Deserialize)]
struct Metadata {
    packages: Vec<Package>,
    workspace_members: Vec<String>,
    resolve: Option<Resolve>,
    target_directory: PathBuf,
}

#[derive(Debug, Deserialize)]
struct Package {
    name: String,
    version: String,
    id: String,
    source: Option<String>,
    manifest_path: PathBuf,
    dependencies: Vec<Dependency>,
    features: BTreeMap<String, Vec<String>>,
    targets: Vec<Target>,
}

#[derive(Debug, Deserialize)]
struct Dependency {
    name: String,
    rename: Option<String>,
    kind: Option<String>,
    optional: bool,
    uses_default_features: bool,
    features: Vec<String>,
    target: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Target {
    name: String,
    kind: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct Resolve {
    nodes: Vec<Node>,
}

#[derive(Debug, Deserialize)]
struct Node {
    id: String,
    deps: Vec<NodeDep>,
}

#[derive(Debug, Deserialize)]
struct NodeDep {
    name: String,
    pkg: String,
    dep_kinds: Vec<DepKind>,
}

#[derive(Debug, Deserialize)]
struct DepKind {
    kind: Option<String>,
    target: Option<String>,
}

/// A normal dependency edge that some features could turn on.
#[derive(Debug)]
struct Edge {
    to: usize,
    /// The name features use for it: the `rename`, else the package name.
    name: String,
    optional: bool,
    uses_default_features: bool,
    features: Vec<String>,
}

/// Every package the workspace could build on this platform, with its possible normal edges.
#[derive(Debug)]
pub(crate) struct Workspace {
    packages: Vec<Package>,
    edges: Vec<Vec<Edge>>,
    members: Vec<usize>,
    target_directory: PathBuf,
}

/// Why the graph could not be read.
#[derive(Debug)]
pub(crate) struct MetadataError(pub(crate) String);

/// The packages of one build and the edges between them.
#[derive(Debug, Clone)]
pub(crate) struct Build {
    packages: BTreeSet<usize>,
    edges: BTreeSet<(usize, usize)>,
    /// The features requested of each package (before its own table expands them).
    requested: Vec<BTreeSet<String>>,
}

fn normalize(name: &str) -> String {
    name.replace('-', "_")
}

fn run(command: &mut Command) -> Result<Vec<u8>, MetadataError> {
    let shown = format!("{command:?}");
    let output = command
        .output()
        .map_err(|error| MetadataError(format!("cannot run {shown}: {error}")))?;
    if output.status.success() {
        Ok(output.stdout)
    } else {
        Err(MetadataError(
            String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        ))
    }
}

impl Workspace {
    /// Runs `cargo metadata` in `root` and reads the graph.
    pub(crate) fn load(root: &Path) -> Result<Workspace, MetadataError> {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let platform = Platform::host().map_err(MetadataError)?;
        let json = run(Command::new(cargo).current_dir(root).args([
            "metadata",
            "--format-version",
            "1",
            "--all-features",
            "--filter-platform",
            &platform.triple,
        ]))?;
        let metadata: Metadata = serde_json::from_slice(&json).map_err(|error| {
            MetadataError(format!("unexpected `cargo metadata` output: {error}"))
        })?;
        Ok(Workspace::from_metadata(metadata, &platform))
    }

    fn from_metadata(metadata: Metadata, platform: &Platform) -> Workspace {
        let index: HashMap<&str, usize> = metadata
            .packages
            .iter()
            .enumerate()
            .map(|(i, package)| (package.id.as_str(), i))
            .collect();
        let nodes: HashMap<&str, &Node> = metadata
            .resolve
            .iter()
            .flat_map(|resolve| &resolve.nodes)
            .map(|node| (node.id.as_str(), node))
            .collect();
        let mut edges = Vec::with_capacity(metadata.packages.len());
        for package in &metadata.packages {
            let mut out = Vec::new();
            let node = nodes.get(package.id.as_str());
            let renamed: Vec<String> = package
                .dependencies
                .iter()
                .filter_map(|dependency| dependency.rename.as_deref().map(normalize))
                .collect();
            let here = |dependency: &&Dependency| {
                dependency.kind.is_none()
                    && dependency
                        .target
                        .as_deref()
                        .is_none_or(|target| platform.matches(target))
            };
            for dependency in package.dependencies.iter().filter(here) {
                let Some(node) = node else { continue };
                // The resolved edge this declaration became on this platform, if any.
                let found = node.deps.iter().find(|dep| {
                    let Some(&to) = index.get(dep.pkg.as_str()) else {
                        return false;
                    };
                    let same_package = metadata.packages[to].name == dependency.name;
                    let same_name = match &dependency.rename {
                        Some(rename) => dep.name == normalize(rename),
                        None => !renamed.contains(&dep.name),
                    };
                    let normal_here = dep
                        .dep_kinds
                        .iter()
                        .any(|kind| kind.kind.is_none() && kind.target == dependency.target);
                    same_package && same_name && normal_here
                });
                if let Some(to) = found.and_then(|dep| index.get(dep.pkg.as_str())) {
                    out.push(Edge {
                        to: *to,
                        name: dependency
                            .rename
                            .clone()
                            .unwrap_or_else(|| dependency.name.clone()),
                        optional: dependency.optional,
                        uses_default_features: dependency.uses_default_features,
                        features: dependency.features.clone(),
                    });
                }
            }
            edges.push(out);
        }
        let members = metadata
            .workspace_members
            .iter()
            .filter_map(|id| index.get(id.as_str()).copied())
            .collect();
        Workspace {
            packages: metadata.packages,
            edges,
            members,
            target_directory: metadata.target_directory,
        }
    }

    /// The workspace member with this name (`-` and `_` alike).
    pub(crate) fn member(&self, name: &str) -> Option<usize> {
        let name = normalize(name);
        self.members
            .iter()
            .copied()
            .find(|&i| normalize(&self.packages[i].name) == name)
    }

    /// The names of the workspace members.
    pub(crate) fn member_names(&self) -> Vec<&str> {
        self.members
            .iter()
            .map(|&i| self.packages[i].name.as_str())
            .collect()
    }

    /// The features a package declares (the implicit ones of optional dependencies included).
    pub(crate) fn features(&self, package: usize) -> Vec<&str> {
        self.packages[package]
            .features
            .keys()
            .map(String::as_str)
            .collect()
    }

    /// Every package named `name` (`-` and `_` alike), any version.
    pub(crate) fn packages_named(&self, name: &str) -> Vec<usize> {
        let name = normalize(name);
        (0..self.packages.len())
            .filter(|&i| normalize(&self.packages[i].name) == name)
            .collect()
    }

    /// Every package name, for suggestions.
    pub(crate) fn package_names(&self) -> BTreeSet<&str> {
        self.packages.iter().map(|p| p.name.as_str()).collect()
    }

    /// A package's name.
    pub(crate) fn name(&self, package: usize) -> &str {
        &self.packages[package].name
    }

    /// A package as `cargo tree` shows it: `name vX.Y.Z`, `(proc-macro)`, and its directory
    /// when it comes from a path, or its source when neither a path nor crates.io.
    pub(crate) fn display(&self, package: usize) -> String {
        let p = &self.packages[package];
        let mut text = format!("{} v{}", p.name, p.version);
        if p.targets
            .iter()
            .any(|target| target.kind.iter().any(|kind| kind == "proc-macro"))
        {
            text.push_str(" (proc-macro)");
        }
        match &p.source {
            None => {
                let dir = p.manifest_path.parent().unwrap_or(&p.manifest_path);
                text.push_str(&format!(" ({})", dir.display()));
            }
            Some(source)
                if source.starts_with("registry+https://github.com/rust-lang/crates.io-index") => {}
            Some(source) if source.starts_with("sparse+https://index.crates.io/") => {}
            Some(source) => {
                let source = source.strip_prefix("git+").unwrap_or(source);
                text.push_str(&format!(" ({source})"));
            }
        }
        text
    }

    /// The build of `root` with its default features and `extra` ones.
    pub(crate) fn build(&self, root: usize, extra: &[&str]) -> Build {
        let mut requested: Vec<BTreeSet<String>> = vec![BTreeSet::new(); self.packages.len()];
        let mut active = vec![false; self.packages.len()];
        active[root] = true;
        if self.packages[root].features.contains_key("default") {
            requested[root].insert("default".to_owned());
        }
        requested[root].extend(extra.iter().map(|feature| (*feature).to_owned()));
        let mut edges = BTreeSet::new();
        loop {
            let mut changed = false;
            edges.clear();
            for from in 0..self.packages.len() {
                if !active[from] {
                    continue;
                }
                let current = requested[from].clone();
                let on = self.expand(from, &current);
                for edge in &self.edges[from] {
                    if edge.optional && !on.deps.contains(edge.name.as_str()) {
                        continue;
                    }
                    edges.insert((from, edge.to));
                    let mut wanted: Vec<String> = edge.features.clone();
                    if edge.uses_default_features
                        && self.packages[edge.to].features.contains_key("default")
                    {
                        wanted.push("default".to_owned());
                    }
                    for map in [&on.dep_features, &on.weak_features] {
                        if let Some(features) = map.get(edge.name.as_str()) {
                            wanted.extend(features.iter().map(|f| (*f).to_owned()));
                        }
                    }
                    if !active[edge.to] {
                        active[edge.to] = true;
                        changed = true;
                    }
                    for feature in wanted {
                        changed |= requested[edge.to].insert(feature);
                    }
                }
            }
            if !changed {
                break;
            }
        }
        let packages = (0..self.packages.len()).filter(|&i| active[i]).collect();
        Build {
            packages,
            edges,
            requested,
        }
    }

    /// Whether `build` turns on the feature `feature` of `package`: requested of it, or named
    /// by one of its features that is (through its own table, as Cargo expands it).
    pub(crate) fn feature_on(&self, build: &Build, package: usize, feature: &str) -> bool {
        if !build.contains(package) {
            return false;
        }
        let table = &self.packages[package].features;
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let mut stack: Vec<&str> = build.requested[package]
            .iter()
            .map(String::as_str)
            .collect();
        while let Some(value) = stack.pop() {
            let name = match value.split_once('/') {
                Some((dep, _)) => dep.strip_suffix('?').unwrap_or(dep),
                None => value,
            };
            if value.starts_with("dep:") || !table.contains_key(name) {
                continue;
            }
            if seen.insert(name) {
                stack.extend(table[name].iter().map(String::as_str));
            }
        }
        seen.contains(feature)
    }

    /// What a package's requested features turn on: its optional dependencies and the
    /// features asked of each dependency.
    fn expand<'a>(&'a self, package: usize, requested: &'a BTreeSet<String>) -> On<'a> {
        let table = &self.packages[package].features;
        let mut on = On::default();
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let mut stack: Vec<&str> = requested.iter().map(String::as_str).collect();
        while let Some(value) = stack.pop() {
            if let Some(dep) = value.strip_prefix("dep:") {
                on.deps.insert(dep);
            } else if let Some((dep, feature)) = value.split_once('/') {
                if let Some(dep) = dep.strip_suffix('?') {
                    on.weak_features.entry(dep).or_default().insert(feature);
                } else {
                    on.deps.insert(dep);
                    on.dep_features.entry(dep).or_default().insert(feature);
                    if table.contains_key(dep) {
                        stack.push(dep);
                    }
                }
            } else if seen.insert(value) {
                match table.get(value) {
                    Some(values) => stack.extend(values.iter().map(String::as_str)),
                    // An optional dependency used as a feature, from before `dep:` existed.
                    None => {
                        on.deps.insert(value);
                    }
                }
            }
        }
        // Weak features apply only to dependencies that are on for another reason.
        on.weak_features.retain(|dep, _| on.deps.contains(dep));
        on
    }

    /// Cargo's target directory for this workspace, as `cargo metadata` reports it.
    pub(crate) fn target_directory(&self) -> &Path {
        &self.target_directory
    }

    /// The `.rlib`s of `packages` built in the target directory (release first, then debug),
    /// the newest of each: the compiled size the packages add, where they were built.
    pub(crate) fn rlib_bytes(&self, packages: &BTreeSet<usize>) -> (u64, usize) {
        let mut total = 0;
        let mut built = 0;
        for &package in packages {
            let Some(lib) = self.packages[package].targets.iter().find(|target| {
                target
                    .kind
                    .iter()
                    .any(|kind| kind == "lib" || kind == "rlib")
            }) else {
                continue;
            };
            let prefix = format!("lib{}-", normalize(&lib.name));
            let newest = ["release", "debug"].iter().find_map(|profile| {
                let dir = self.target_directory.join(profile).join("deps");
                std::fs::read_dir(dir)
                    .ok()?
                    .filter_map(Result::ok)
                    .filter(|entry| {
                        let name = entry.file_name();
                        let name = name.to_string_lossy();
                        name.starts_with(&prefix) && name.ends_with(".rlib")
                    })
                    .filter_map(|entry| {
                        let metadata = entry.metadata().ok()?;
                        Some((metadata.modified().ok()?, metadata.len()))
                    })
                    .max()
            });
            if let Some((_, bytes)) = newest {
                total += bytes;
                built += 1;
            }
        }
        (total, built)
    }
}

#[derive(Debug, Default)]
struct On<'a> {
    deps: BTreeSet<&'a str>,
    dep_features: BTreeMap<&'a str, BTreeSet<&'a str>>,
    weak_features: BTreeMap<&'a str, BTreeSet<&'a str>>,
}

impl Build {
    /// The packages of the build, the root included.
    pub(crate) fn packages(&self) -> &BTreeSet<usize> {
        &self.packages
    }

    /// Whether `package` is in the build.
    pub(crate) fn contains(&self, package: usize) -> bool {
        self.packages.contains(&package)
    }

    /// The packages that depend on `package` directly in this build.
    pub(crate) fn dependents(&self, package: usize) -> Vec<usize> {
        self.edges
            .iter()
            .filter(|(_, to)| *to == package)
            .map(|(from, _)| *from)
            .collect()
    }

    /// The reverse dependency tree of `package` up to the root, drawn as
    /// `cargo tree -i PACKAGE -e normal` draws it: dependents sorted by name and version, a
    /// package whose dependents were already drawn marked `(*)` and not drawn again.
    pub(crate) fn inverted_tree(&self, workspace: &Workspace, package: usize) -> String {
        let mut dependents: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for &(from, to) in &self.edges {
            dependents.entry(to).or_default().push(from);
        }
        for list in dependents.values_mut() {
            list.sort_by(|&a, &b| {
                let (a, b) = (&workspace.packages[a], &workspace.packages[b]);
                (&a.name, &a.version, &a.id).cmp(&(&b.name, &b.version, &b.id))
            });
        }
        let mut out = String::new();
        let mut drawn = BTreeSet::new();
        let mut path = Vec::new();
        draw(
            workspace,
            &dependents,
            package,
            "",
            &mut drawn,
            &mut path,
            &mut out,
        );
        out
    }
}

fn draw(
    workspace: &Workspace,
    dependents: &BTreeMap<usize, Vec<usize>>,
    package: usize,
    prefix: &str,
    drawn: &mut BTreeSet<usize>,
    path: &mut Vec<usize>,
    out: &mut String,
) {
    let children = dependents.get(&package).map_or(&[][..], Vec::as_slice);
    let new = drawn.insert(package);
    let in_cycle = path.contains(&package);
    out.push_str(&workspace.display(package));
    if !children.is_empty() && (!new || in_cycle) {
        out.push_str(" (*)");
    }
    out.push('\n');
    if !new || in_cycle {
        return;
    }
    path.push(package);
    for (i, &child) in children.iter().enumerate() {
        let last = i + 1 == children.len();
        out.push_str(prefix);
        out.push_str(if last { "└── " } else { "├── " });
        let deeper = format!("{prefix}{}", if last { "    " } else { "│   " });
        draw(workspace, dependents, child, &deeper, drawn, path, out);
    }
    path.pop();
}
