//! The audit's findings: which rule, where, and the fix; rendered by miette or as JSON.

use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;

use miette::{GraphicalReportHandler, GraphicalTheme, Severity};
use serde_json::{Value, json};
pub use velocity_policy_lang::diagnostic::Renderable;
use velocity_policy_lang::source::Position;
use velocity_policy_lang::{Label, Sources};

/// A rule of the audit. Each has a stable code, `policy::assets::` followed by its id; the id is the
/// Lighthouse audit's where Lighthouse has one ([`Rule::lighthouse`]), so a finding can be
/// cross-referenced with a Lighthouse report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Rule {
    /// A JPEG encoded at a higher quality than it needs.
    OptimizedImages,
    /// An image file over `max_image`.
    ImageSize,
    /// A PNG or JPEG whose AVIF or WebP would be much smaller, with no such alternative.
    ModernImageFormats,
    /// An `<img>` without `width` and `height`.
    UnsizedImages,
    /// An image shown in a box of another shape than its file.
    ImageAspectRatio,
    /// An image with many more pixels than it is shown at.
    ResponsiveImages,
    /// A `srcset` with width descriptors and no `sizes`.
    SrcsetSizes,
    /// The likely LCP image is lazy-loaded.
    LcpLazyLoaded,
    /// The likely LCP image is fetched at the default priority.
    LcpFetchPriority,
    /// An eager image far below the fold (an estimate).
    OffscreenImages,
    /// More `fetchpriority="high"` elements than `max_high_priority`.
    TooManyHighPriority,
    /// More `<link rel="preload">` than `max_preloads`.
    TooManyPreloads,
    /// A used `@font-face` whose `font-display` hides text.
    FontDisplay,
    /// A font that is not WOFF2.
    FontFormat,
    /// A font file over `max_font`.
    FontSize,
    /// More font files in one document than `max_font_files`.
    TooManyFontFiles,
    /// More weights of one family than `max_font_weights`.
    TooManyFontWeights,
    /// A local reference to a file that is not in the folder.
    MissingAsset,
    /// A truncated or corrupt image or font, or one of no format we know.
    UnreadableAsset,
}

/// Each rule's id and its code, from one literal: the code is `policy::assets::` and the id,
/// a static string in the scheme of `velocity-policy-lang`'s diagnostics (`velocity_policy::...`) and the gate's
/// (`policy::gate::...`).
macro_rules! rule_ids {
    ($($rule:ident => $id:literal,)*) => {
        impl Rule {
            /// The rule's id: the Lighthouse audit's id where the rule is that audit.
            #[must_use]
            pub fn id(self) -> &'static str {
                match self {
                    $(Rule::$rule => $id,)*
                }
            }

            /// The stable code: `policy::assets::` and the id.
            #[must_use]
            pub fn code(self) -> &'static str {
                match self {
                    $(Rule::$rule => concat!("policy::assets::", $id),)*
                }
            }
        }
    };
}

rule_ids! {
    OptimizedImages => "uses-optimized-images",
    ImageSize => "image-size",
    ModernImageFormats => "modern-image-formats",
    UnsizedImages => "unsized-images",
    ImageAspectRatio => "image-aspect-ratio",
    ResponsiveImages => "uses-responsive-images",
    SrcsetSizes => "srcset-sizes",
    LcpLazyLoaded => "lcp-lazy-loaded",
    LcpFetchPriority => "lcp-fetchpriority",
    OffscreenImages => "offscreen-images",
    TooManyHighPriority => "too-many-high-priority",
    TooManyPreloads => "too-many-preloads",
    FontDisplay => "font-display",
    FontFormat => "font-format",
    FontSize => "font-size",
    TooManyFontFiles => "too-many-font-files",
    TooManyFontWeights => "too-many-font-weights",
    MissingAsset => "missing-asset",
    UnreadableAsset => "unreadable-asset",
}

impl Rule {
    /// Every rule, in the order of the docs' table.
    pub const ALL: &'static [Rule] = &[
        Rule::OptimizedImages,
        Rule::ImageSize,
        Rule::ModernImageFormats,
        Rule::UnsizedImages,
        Rule::ImageAspectRatio,
        Rule::ResponsiveImages,
        Rule::SrcsetSizes,
        Rule::LcpLazyLoaded,
        Rule::LcpFetchPriority,
        Rule::OffscreenImages,
        Rule::TooManyHighPriority,
        Rule::TooManyPreloads,
        Rule::FontDisplay,
        Rule::FontFormat,
        Rule::FontSize,
        Rule::TooManyFontFiles,
        Rule::TooManyFontWeights,
        Rule::MissingAsset,
        Rule::UnreadableAsset,
    ];

    /// The Lighthouse 12 audit this rule corresponds to, or `None` where Lighthouse has none.
    /// `font-display` follows the newer `font-display-insight` (which reports `block` and
    /// `fallback` too), and `lcp-fetchpriority` is the priority check of
    /// `lcp-discovery-insight`.
    #[must_use]
    pub fn lighthouse(self) -> Option<&'static str> {
        match self {
            Rule::OptimizedImages
            | Rule::ModernImageFormats
            | Rule::UnsizedImages
            | Rule::ImageAspectRatio
            | Rule::ResponsiveImages
            | Rule::LcpLazyLoaded
            | Rule::OffscreenImages => Some(self.id()),
            Rule::LcpFetchPriority => Some("lcp-discovery-insight"),
            Rule::FontDisplay => Some("font-display-insight"),
            _ => None,
        }
    }

    /// Whether its findings rest on an estimate of the layout (where an element lands on the
    /// page), which the message says.
    #[must_use]
    pub fn is_estimate(self) -> bool {
        matches!(self, Rule::OffscreenImages)
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// One thing the audit found: the rule, a message, the fix, and labels on the document (or
/// style sheet) that references the asset, primary first.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// The rule that fired.
    pub rule: Rule,
    /// The file it is about (folder-relative, `/`-separated), where it is about one.
    pub asset: Option<String>,
    /// What is wrong, on one line.
    pub message: String,
    /// How to fix it.
    pub help: String,
    /// Where, primary first.
    pub labels: Vec<Label>,
}

/// The images and fonts a browser downloads for one document on the reference phone, by the
/// audit's reading (folder-relative paths).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageAssets {
    /// The document.
    pub path: String,
    /// Image files: each `<img>`'s chosen candidate (lazy ones near the first screen only) and
    /// the backgrounds of rendered elements.
    pub images: BTreeSet<String>,
    /// Font files: the faces its text needs, and preloaded fonts.
    pub fonts: BTreeSet<String>,
}

/// What [`audit`](super::audit) found in a folder.
#[derive(Debug, Clone)]
pub struct Report {
    /// The folder audited.
    pub folder: PathBuf,
    /// HTML documents read.
    pub documents: usize,
    /// Distinct image files read.
    pub images: usize,
    /// Distinct font files read.
    pub fonts: usize,
    /// Every finding, sorted by file and position.
    pub findings: Vec<Finding>,
    /// What each document downloads, in the order the documents were read.
    pub pages: Vec<PageAssets>,
    pub(crate) sources: Sources,
}

impl Report {
    /// Whether nothing was found.
    #[must_use]
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty()
    }

    /// The documents and style sheets the findings point into.
    #[must_use]
    pub fn sources(&self) -> &Sources {
        &self.sources
    }

    /// The file, line and column of a finding's primary label.
    #[must_use]
    pub fn position(&self, finding: &Finding) -> Option<Position<'_>> {
        finding
            .labels
            .first()
            .and_then(|label| self.sources.position(label.loc))
    }

    /// The finding with its snippet, for a miette handler: drawn by `velocity-policy-lang`'s one
    /// adapter, as the language's and the gate's reports are (an excerpt around the labels, so
    /// a finding in a minified file of any width costs what is drawn).
    #[must_use]
    pub fn renderable<'a>(&'a self, finding: &'a Finding) -> Renderable<'a> {
        Renderable::new(finding, &finding.labels, &self.sources)
    }

    /// The finding in a fixed, colourless theme and width, for tests and logs.
    #[must_use]
    pub fn render_plain(&self, finding: &Finding) -> String {
        let handler = GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor())
            .with_width(velocity_policy_lang::diagnostic::PLAIN_WIDTH)
            .with_links(false);
        let mut out = String::new();
        if handler
            .render_report(&mut out, &self.renderable(finding))
            .is_err()
        {
            out = format!("{}: {}", finding.rule.code(), finding.message);
        }
        out
    }

    /// One finding as JSON: code, rule, Lighthouse id, message, help, position and labels.
    #[must_use]
    pub fn finding_json(&self, finding: &Finding) -> Value {
        let labels: Vec<Value> = finding
            .labels
            .iter()
            .map(|label| {
                let position = self.sources.position(label.loc);
                json!({
                    "file": position.map(|p| p.file),
                    "line": position.map(|p| p.line),
                    "column": position.map(|p| p.column),
                    "end_line": position.map(|p| p.end_line),
                    "end_column": position.map(|p| p.end_column),
                    "text": label.text,
                })
            })
            .collect();
        let primary = self.position(finding);
        json!({
            "severity": "error",
            "code": finding.rule.code(),
            "rule": finding.rule.id(),
            "lighthouse": finding.rule.lighthouse(),
            "estimate": finding.rule.is_estimate(),
            "asset": finding.asset,
            "message": finding.message,
            "help": finding.help,
            "file": primary.map(|p| p.file),
            "line": primary.map(|p| p.line),
            "column": primary.map(|p| p.column),
            "labels": labels,
        })
    }

    /// The whole report as one JSON document.
    #[must_use]
    pub fn to_json(&self) -> Value {
        json!({
            "folder": self.folder.display().to_string(),
            "documents": self.documents,
            "images": self.images,
            "fonts": self.fonts,
            "findings": self.findings.len(),
            "pages": self
                .pages
                .iter()
                .map(|page| json!({ "path": page.path, "images": page.images, "fonts": page.fonts }))
                .collect::<Vec<_>>(),
            "diagnostics": self
                .findings
                .iter()
                .map(|finding| self.finding_json(finding))
                .collect::<Vec<_>>(),
        })
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Finding {}

/// The rule's code, its severity (every finding is an error) and the fix; the labels and the
/// snippet come from the [`Report`]'s sources ([`Report::renderable`]).
impl miette::Diagnostic for Finding {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        Some(Box::new(self.rule.code()))
    }

    fn severity(&self) -> Option<Severity> {
        Some(Severity::Error)
    }

    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        Some(Box::new(&self.help))
    }
}
