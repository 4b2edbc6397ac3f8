//! The `ceilings` stanzas: each line measured ([`web`], [`graph`](super::graph) or
//! [`artifact`]), compared with its ceiling, and with `--ratchet` lowered
//! toward what it measures.

use std::collections::BTreeMap;
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use velocity_policy_lang::{Ceiling, Located, Metric, Spec};

use super::artifact::{self, ArtifactError};
use super::graph::Workspace;
use super::problem::{GateError, Problem};
use super::{Gate, ratchet, web};

/// One measured ceiling.
#[derive(Debug)]
pub(super) struct Row {
    /// The name of its `ceilings` stanza.
    stanza: String,
    label: String,
    unit: Option<String>,
    ceiling: u64,
    measured: Option<u64>,
    pub(super) lowered: Option<ratchet::Lowered>,
    /// Without `--ratchet`: what the ratchet would lower the ceiling to, said in the table so
    /// that a ceiling far above its measurement does not pass in silence.
    could_lower: Option<ratchet::Lowered>,
    headroom: f64,
}

impl Row {
    pub(super) fn over(&self) -> bool {
        self.measured
            .is_some_and(|measured| measured > self.ceiling)
    }
}

/// The ratchet's edits, by source file index: the byte range of each number and its new text.
pub(super) type Edits = BTreeMap<usize, Vec<(Range<usize>, String)>>;

fn size_text(value: u64, unit: Option<&str>) -> String {
    ratchet::shown(value, unit)
}

impl Gate<'_> {
    /// Measures every line of every `ceilings` stanza; with `ratchet`, also what the files'
    /// numbers become.
    pub(super) fn ceilings(&mut self, spec: &Spec, ratchet: bool) -> (Vec<Row>, Edits) {
        let mut rows = Vec::new();
        let mut edits = Edits::new();
        for stanza in &spec.ceilings {
            for ceiling in &stanza.lines {
                let measured = self.measure(stanza.dir.as_ref(), ceiling);
                let lowered = measured.and_then(|m| ratchet::ratchet(ceiling, m));
                if ratchet && let Some(lowered) = &lowered {
                    edit(&mut edits, ceiling, lowered);
                }
                let row = Row {
                    stanza: stanza.name.value.clone(),
                    label: ceiling.label(),
                    unit: ceiling.at_most.value.unit.clone(),
                    ceiling: ceiling.at_most.value.value,
                    measured,
                    could_lower: if ratchet { None } else { lowered.clone() },
                    lowered: if ratchet { lowered } else { None },
                    headroom: ceiling.headroom.value,
                };
                if row.over() {
                    self.over_ceiling(&row, ceiling);
                }
                rows.push(row);
            }
        }
        (rows, edits)
    }

    fn over_ceiling(&mut self, row: &Row, ceiling: &Ceiling) {
        let unit = row.unit.as_deref();
        self.problems.push(Problem::at(
            GateError::OverCeiling {
                metric: row.label.clone(),
                measured: size_text(row.measured.unwrap_or(0), unit),
                ceiling: size_text(row.ceiling, unit),
            },
            ceiling.at_most.loc,
            "the ceiling",
        ));
    }

    fn site(&mut self, dir: &Located<String>) -> Option<&web::Site> {
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
    fn open_site(&mut self, dir: &Located<String>) -> bool {
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

    /// Where a built binary is: a path under `target/` is read from Cargo's target directory
    /// as `cargo metadata` reports it (so `CARGO_TARGET_DIR` and `build.target-dir` are
    /// followed); any other path, or when there is no Cargo workspace at the root, is relative
    /// to the root.
    fn built(&mut self, path: &str) -> PathBuf {
        let relative = Path::new(path);
        let root = self.root;
        if let Ok(rest) = relative.strip_prefix("target") {
            let loaded = self
                .workspace
                .get_or_insert_with(|| Workspace::load(root).map_err(|error| error.0));
            if let Ok(workspace) = loaded {
                return workspace.target_directory().join(rest);
            }
        }
        root.join(relative)
    }

    /// The value of one ceiling's metric, or `None` (with a problem) when it cannot be measured.
    fn measure(&mut self, dir: Option<&Located<String>>, ceiling: &Ceiling) -> Option<u64> {
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
            Metric::Binary(path) => match artifact::binary_size(&self.built(path)) {
                Ok(size) => Some(size),
                Err(error) => {
                    self.artifact_problem(ceiling, path, error);
                    None
                }
            },
            Metric::BinaryCode(path) => match artifact::code_size(&self.built(path)) {
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
}

/// Where the ratchet writes a lowered ceiling: its `at most` and `measured` numbers.
fn edit(edits: &mut Edits, ceiling: &Ceiling, lowered: &ratchet::Lowered) {
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

pub(super) fn row_json(row: &Row) -> Value {
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
        "can_lower_to": row.could_lower.as_ref().map(|l| l.ceiling.clone()),
    })
}

/// The four cells of a row: metric, measured, ceiling, headroom left.
fn cells(row: &Row) -> [String; 4] {
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
}

/// One table per stanza, its columns aligned across all of them.
pub(super) fn print_ceilings(out: &mut dyn Write, rows: &[Row]) {
    let mut stanzas: Vec<&str> = Vec::new();
    for row in rows {
        if !stanzas.contains(&row.stanza.as_str()) {
            stanzas.push(&row.stanza);
        }
    }
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
                if let Some(lower) = &row.could_lower {
                    let unit = row.unit.as_deref();
                    let _ = writeln!(
                        out,
                        "    can come down by {} to {}: measured {} plus its {:.0}% headroom; `--ratchet` writes it",
                        size_text(row.ceiling.saturating_sub(lower.ceiling_value), unit),
                        size_text(lower.ceiling_value, unit),
                        row.measured
                            .map_or_else(|| "-".to_owned(), |m| size_text(m, unit)),
                        row.headroom * 100.0,
                    );
                }
            }
        }
        let _ = writeln!(out);
    }
}
