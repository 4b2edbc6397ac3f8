//! The build-time and delivery side of the model: what `policy locality`, `policy gate` and
//! `policy assets` read (the `locality`, `ceilings`, `quarantine` and `assets` stanzas). The
//! runtime never reads these.

use std::fmt;

use super::{Items, Named};
use crate::source::{Loc, Located};

// ---- locality: the calls a request makes (`policy locality`) ---------------------------------

/// Whether the request waits for a hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HopKind {
    /// `blocking`: the request waits for the call, so every round trip adds to its latency.
    Blocking,
    /// `async`: the request does not wait (deferred work, or a call the browser makes).
    Async,
}

impl HopKind {
    /// The kind from its name in the language.
    #[must_use]
    pub fn from_name(name: &str) -> Option<HopKind> {
        match name {
            "blocking" => Some(HopKind::Blocking),
            "async" => Some(HopKind::Async),
            _ => None,
        }
    }

    /// Its name in the language.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            HopKind::Blocking => "blocking",
            HopKind::Async => "async",
        }
    }
}

impl fmt::Display for HopKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `NAME = blocking env VARIABLE`: one call a request makes, and the environment variable whose
/// connection string locates the service it calls. The region is never written in the policy:
/// it is derived from that variable where the check runs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HopSpec {
    /// The service's name in the policy (`database`, `cache`).
    pub name: Located<String>,
    /// Whether the request waits for it.
    pub kind: Located<HopKind>,
    /// The variable holding the service's connection string (`DATABASE_URL`).
    pub variable: Located<String>,
    /// The statement or attribute.
    pub loc: Loc,
}

impl HopSpec {
    /// A hop.
    #[must_use]
    pub fn new(
        name: Located<String>,
        kind: Located<HopKind>,
        variable: Located<String>,
        loc: Loc,
    ) -> Self {
        HopSpec {
            name,
            kind,
            variable,
            loc,
        }
    }

    /// Whether the request waits for it.
    #[must_use]
    pub fn is_blocking(&self) -> bool {
        self.kind.value == HopKind::Blocking
    }
}

impl Named for HopSpec {
    const KIND: &'static str = "hop";
    fn name(&self) -> &Located<String> {
        &self.name
    }
}

/// `locality { database = blocking env DATABASE_URL; assets = async env R2_URL }`: the hops a
/// request makes. `policy locality --check` compares each blocking hop's region with the
/// compute's, both derived from the environment.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LocalitySpec {
    /// The hops by name, in declaration order.
    pub hops: Items<HopSpec>,
    /// The stanza.
    pub loc: Loc,
}

impl LocalitySpec {
    /// A locality stanza with no hops yet.
    #[must_use]
    pub fn new(loc: Loc) -> Self {
        LocalitySpec {
            hops: Items::default(),
            loc,
        }
    }
}

// ---- the build-time side: ceilings and quarantines (`policy gate`) -------------------------------

/// A measure of a static front-end build (a bundler's output folder: HTML documents, JS
/// modules, CSS). "Loads" means the `<script src>`, `<link rel="modulepreload">` and
/// `<link rel="preload" as="script">` of a document, followed through static imports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WebMetric {
    /// `baseline_js_kb`: the JS that every HTML document loads.
    BaselineJs,
    /// `route_js_kb`: the largest JS total one document loads.
    RouteJs,
    /// `median_route_js_kb`: the median of the documents' JS totals.
    MedianRouteJs,
    /// `total_client_js_kb`: every JS file of the folder, loaded or not.
    TotalClientJs,
    /// `doc_html_kb`: the largest HTML document.
    DocHtml,
}

impl WebMetric {
    /// Every front-end metric, in the order the docs list them.
    pub const ALL: [WebMetric; 5] = [
        WebMetric::BaselineJs,
        WebMetric::RouteJs,
        WebMetric::MedianRouteJs,
        WebMetric::TotalClientJs,
        WebMetric::DocHtml,
    ];

    /// Its name in the language.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            WebMetric::BaselineJs => "baseline_js_kb",
            WebMetric::RouteJs => "route_js_kb",
            WebMetric::MedianRouteJs => "median_route_js_kb",
            WebMetric::TotalClientJs => "total_client_js_kb",
            WebMetric::DocHtml => "doc_html_kb",
        }
    }

    /// The metric from its name in the language.
    #[must_use]
    pub fn from_name(name: &str) -> Option<WebMetric> {
        WebMetric::ALL
            .into_iter()
            .find(|metric| metric.as_str() == name)
    }
}

/// What a ceiling measures.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Metric {
    /// A measure of the front-end build in the stanza's `dir`.
    Web(WebMetric),
    /// `binary "PATH"`: the size of a built binary.
    Binary(String),
    /// `binary_code "PATH"`: the size of a built binary's code (its executable sections,
    /// `.text` on ELF).
    BinaryCode(String),
    /// `crates "PACKAGE"`: how many crates a package's default build has, itself included.
    Crates(String),
    /// `files "GLOB"`: the total size of the files a glob matches.
    Files(String),
}

impl Metric {
    /// The metrics that name what they measure with a string after them.
    pub const WITH_TARGET: [&'static str; 4] = ["binary", "binary_code", "crates", "files"];

    /// Every metric name, for suggestions.
    pub fn names() -> impl Iterator<Item = &'static str> + Clone {
        WebMetric::ALL
            .into_iter()
            .map(WebMetric::as_str)
            .chain(Metric::WITH_TARGET)
    }

    /// The metric's keyword in the language.
    #[must_use]
    pub fn keyword(&self) -> &'static str {
        match self {
            Metric::Web(metric) => metric.as_str(),
            Metric::Binary(_) => "binary",
            Metric::BinaryCode(_) => "binary_code",
            Metric::Crates(_) => "crates",
            Metric::Files(_) => "files",
        }
    }

    /// What it measures after the keyword: a path, a package or a glob.
    #[must_use]
    pub fn target(&self) -> Option<&str> {
        match self {
            Metric::Web(_) => None,
            Metric::Binary(target)
            | Metric::BinaryCode(target)
            | Metric::Crates(target)
            | Metric::Files(target) => Some(target),
        }
    }

    /// Whether it counts crates rather than measuring bytes.
    #[must_use]
    pub fn is_count(&self) -> bool {
        matches!(self, Metric::Crates(_))
    }

    /// Whether a compressed size can be asked for.
    #[must_use]
    pub fn can_compress(&self) -> bool {
        matches!(self, Metric::Web(_) | Metric::Files(_))
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.keyword())?;
        match self.target() {
            Some(target) => write!(f, " \"{target}\""),
            None => Ok(()),
        }
    }
}

/// Whether a size is measured as stored or compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Compression {
    /// The bytes as they are on disk.
    #[default]
    Raw,
    /// `gzip`: each file compressed on its own with gzip at its best level (9), as a server
    /// or CDN would send it.
    Gzip,
}

/// A size or a count, and the unit it was written in (so that a rewrite keeps the unit).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Amount {
    /// Bytes for a size, the number itself for a count.
    pub value: u64,
    /// The unit as written (`kb`, `mb`, ...); `None` for a count.
    pub unit: Option<String>,
}

impl Amount {
    /// An amount.
    #[must_use]
    pub fn new(value: u64, unit: Option<String>) -> Self {
        Amount { value, unit }
    }
}

/// `METRIC [gzip] at most CEILING measured VALUE headroom P%`: one line of a `ceilings` stanza.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Ceiling {
    /// What is measured, located at the metric's keyword and target.
    pub metric: Located<Metric>,
    /// Stored or compressed size.
    pub compression: Compression,
    /// `at most`: the most the measurement may be; the gate fails above it.
    pub at_most: Located<Amount>,
    /// The measurement the ceiling was last set from.
    pub measured: Located<Amount>,
    /// How much growth the ceiling allows over `measured`: the ratchet lowers the ceiling
    /// toward `measured × (1 + headroom)`.
    pub headroom: Located<f64>,
    /// The whole line.
    pub loc: Loc,
}

impl Ceiling {
    /// A ceiling.
    #[must_use]
    pub fn new(
        metric: Located<Metric>,
        at_most: Located<Amount>,
        measured: Located<Amount>,
        headroom: Located<f64>,
        loc: Loc,
    ) -> Self {
        Ceiling {
            metric,
            compression: Compression::Raw,
            at_most,
            measured,
            headroom,
            loc,
        }
    }

    /// The metric as the table shows it: `baseline_js_kb gzip`, `binary "target/release/x"`.
    #[must_use]
    pub fn label(&self) -> String {
        match self.compression {
            Compression::Raw => self.metric.value.to_string(),
            Compression::Gzip => format!("{} gzip", self.metric.value),
        }
    }
}

/// `ceilings NAME { dir = "..."; METRIC at most ... }`: what a build may weigh, one ceiling a
/// line, each lowered by the ratchet as the measurement allows and never raised.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CeilingsSpec {
    /// Its name.
    pub name: Located<String>,
    /// The front-end build folder the front-end metrics read.
    pub dir: Option<Located<String>>,
    /// Its ceilings, in order.
    pub lines: Vec<Ceiling>,
    /// The stanza.
    pub loc: Loc,
}

impl CeilingsSpec {
    /// A `ceilings` stanza with no lines yet.
    #[must_use]
    pub fn new(name: Located<String>, loc: Loc) -> Self {
        CeilingsSpec {
            name,
            dir: None,
            lines: Vec::new(),
            loc,
        }
    }
}

impl Named for CeilingsSpec {
    const KIND: &'static str = "ceilings";
    fn name(&self) -> &Located<String> {
        &self.name
    }
}

/// `quarantine CRATE { package = "..."; behind = "FEATURE"; only = "..."; justification = "..." }`:
/// a heavy crate that must stay out of a package's default build.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct QuarantineSpec {
    /// The stanza's name: the heavy crate, unless `crate` names it.
    pub name: Located<String>,
    /// `crate = "..."`: the heavy crate, when the stanza's name is only a label (so one crate
    /// can be quarantined for several packages).
    pub krate: Option<Located<String>>,
    /// `feature = "velocity-policy-runtime/chaos"`: instead of a crate, a feature of a package (named
    /// `package/feature`) that the default build must not turn on and `behind` must.
    pub feature: Option<Located<String>>,
    /// The package whose default build must not contain it.
    pub package: Located<String>,
    /// The feature of `package` it must stay behind.
    pub behind: Located<String>,
    /// The only crates allowed to depend on it directly (empty: any).
    pub only: Vec<Located<String>>,
    /// Why it is allowed in the default build after all, printed by the gate.
    pub justification: Option<Located<String>>,
    /// The stanza.
    pub loc: Loc,
}

impl QuarantineSpec {
    /// The heavy crate (`-` and `_` are the same in crate names, as on crates.io).
    #[must_use]
    pub fn crate_name(&self) -> &Located<String> {
        self.krate.as_ref().unwrap_or(&self.name)
    }

    /// A quarantine with no `only` list and no justification.
    #[must_use]
    pub fn new(
        name: Located<String>,
        package: Located<String>,
        behind: Located<String>,
        loc: Loc,
    ) -> Self {
        QuarantineSpec {
            name,
            krate: None,
            feature: None,
            package,
            behind,
            only: Vec::new(),
            justification: None,
            loc,
        }
    }
}

impl Named for QuarantineSpec {
    const KIND: &'static str = "quarantine";
    fn name(&self) -> &Located<String> {
        &self.name
    }
}

// ---- assets: what a built front end may ship (`policy assets`) ---------------------------------

/// `assets NAME { dir = "web/dist"; max_image = 200kb; ... }`: what a built front end may ship.
///
/// Every setting is optional: an absent one takes its `DEFAULT_*` value, located at the stanza.
/// Counts are per HTML document; sizes are per file.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AssetsSpec {
    /// Its name.
    pub name: Located<String>,
    /// The folder of built documents, relative to the policy file's directory (the command line
    /// may name another).
    pub dir: Option<Located<String>>,
    /// The largest image file, in bytes.
    pub max_image: Located<u64>,
    /// Read and checked, but no longer used by `policy assets`: the image rules now judge what
    /// an image's box needs (its pixels against its displayed size, the likely LCP by area, as
    /// Lighthouse does) rather than a byte size. Kept so that existing policies still parse.
    pub large_image: Located<u64>,
    /// The largest font file, in bytes.
    pub max_font: Located<u64>,
    /// Font files one document may use (the `@font-face` faces its text needs).
    pub max_font_files: Located<u32>,
    /// Weights of one font family one document may use.
    pub max_font_weights: Located<u32>,
    /// Elements with `fetchpriority="high"` in one document.
    pub max_high_priority: Located<u32>,
    /// `<link rel="preload">` elements in one document.
    pub max_preloads: Located<u32>,
    /// The stanza.
    pub loc: Loc,
}

impl AssetsSpec {
    /// 200 KiB: an image above it is oversized.
    pub const DEFAULT_MAX_IMAGE: u64 = 200 * 1024;
    /// 50 KiB: an image from this size is large.
    pub const DEFAULT_LARGE_IMAGE: u64 = 50 * 1024;
    /// 100 KiB: a font above it is oversized.
    pub const DEFAULT_MAX_FONT: u64 = 100 * 1024;
    /// Four font files per document.
    pub const DEFAULT_MAX_FONT_FILES: u32 = 4;
    /// Three weights per family.
    pub const DEFAULT_MAX_FONT_WEIGHTS: u32 = 3;
    /// Two high-priority elements per document.
    pub const DEFAULT_MAX_HIGH_PRIORITY: u32 = 2;
    /// Three preloads per document.
    pub const DEFAULT_MAX_PRELOADS: u32 = 3;

    /// An `assets` stanza with every setting at its default, located at `loc`.
    #[must_use]
    pub fn new(name: Located<String>, loc: Loc) -> Self {
        AssetsSpec {
            name,
            dir: None,
            max_image: Located::new(Self::DEFAULT_MAX_IMAGE, loc),
            large_image: Located::new(Self::DEFAULT_LARGE_IMAGE, loc),
            max_font: Located::new(Self::DEFAULT_MAX_FONT, loc),
            max_font_files: Located::new(Self::DEFAULT_MAX_FONT_FILES, loc),
            max_font_weights: Located::new(Self::DEFAULT_MAX_FONT_WEIGHTS, loc),
            max_high_priority: Located::new(Self::DEFAULT_MAX_HIGH_PRIORITY, loc),
            max_preloads: Located::new(Self::DEFAULT_MAX_PRELOADS, loc),
            loc,
        }
    }
}

impl Default for AssetsSpec {
    /// The defaults, for auditing a folder without a policy file: named `default`, at
    /// [`Loc::External(0)`](Loc::External).
    fn default() -> Self {
        let loc = Loc::External(0);
        AssetsSpec::new(Located::new("default".to_owned(), loc), loc)
    }
}

impl Named for AssetsSpec {
    const KIND: &'static str = "assets";
    fn name(&self) -> &Located<String> {
        &self.name
    }
}
