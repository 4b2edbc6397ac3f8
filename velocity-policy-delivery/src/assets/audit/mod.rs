//! The audit: every HTML document of a folder, the style sheets it applies, the images and fonts
//! a browser would download for it, and the rules of the [module docs](super).
//!
//! One document at a time: read its tree ([`html`](super::html)), its style sheets and the
//! cascade ([`style`](super::style)), estimate where each element lands on the reference phone
//! ([`layout`]), then run the image rules ([`images`]), the font rules ([`fonts`]) and the
//! priority rules ([`layout`]). Files are read once, however many documents reference them.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use velocity_policy_lang::{AssetsSpec, Label, Loc, SourceId, Sources};

use super::html::{self, SheetRef};
use super::report::{Finding, PageAssets, Report, Rule};
use super::style::cascade::{self, Computed, SheetInput};
use super::style::{self, Device, Sheet};

mod fonts;
mod images;
mod layout;
mod lcp;
mod walk;

use walk::{FileInfo, Target, dir_of, display, resolve};

/// Raster files below this size are not worth converting: Lighthouse's `modern-image-formats`
/// reports nothing that would save less than 8 KiB.
pub const MODERN_FORMAT_MIN_BYTES: u64 = 8 * 1024;

/// A declared height this many pixels or more away from the one the file's ratio gives is a
/// mismatch (Lighthouse's `image-aspect-ratio` threshold).
pub const ASPECT_RATIO_TOLERANCE_PX: f64 = 2.0;

/// A size for a person: `512b`, `44.3kb`, `1.5mb` (powers of 1024, as the language's units).
fn size(bytes: u64) -> String {
    const KB: f64 = 1024.0;
    // Shown rounded to a tenth: precision past 2^53 bytes does not matter.
    let value = bytes as f64;
    let (scaled, unit) = if value >= KB * KB * KB {
        (value / (KB * KB * KB), "gb")
    } else if value >= KB * KB {
        (value / (KB * KB), "mb")
    } else if value >= KB {
        (value / KB, "kb")
    } else {
        return format!("{bytes}b");
    };
    let text = format!("{scaled:.1}");
    format!("{}{unit}", text.strip_suffix(".0").unwrap_or(&text))
}

/// Audits every `.html` and `.htm` document under `folder` (recursively, not following
/// symbolic links to directories) against `spec`, and the style sheets, images and fonts they
/// reference.
///
/// A reference is resolved as a browser would for a site served from `folder`: `/x` from the
/// folder, `x` from the referencing file's directory; query strings and fragments are ignored;
/// `http:`, `https:`, `//host` and `data:` URLs are not audited (their bytes are not here).
///
/// Only the folder itself failing to be read is an error: a file that is missing, truncated or
/// corrupt is a finding.
pub fn audit(folder: &Path, spec: &AssetsSpec) -> io::Result<Report> {
    let documents = walk::documents(folder)?;
    let mut auditor = Auditor {
        root: folder,
        spec,
        device: Device::MOBILE,
        user_agent: style::parse(cascade::USER_AGENT_CSS, 0),
        sources: Sources::new(),
        files: HashMap::new(),
        listings: HashMap::new(),
        sheets: HashMap::new(),
        checked_faces: HashSet::new(),
        findings: Vec::new(),
        images: BTreeSet::new(),
        fonts: BTreeSet::new(),
        pages: Vec::new(),
    };
    for document in &documents {
        auditor.document(document);
    }
    Ok(auditor.finish(documents.len()))
}

/// A style sheet file, read once however many documents link it.
#[derive(Debug)]
struct SheetFile {
    source: SourceId,
    dir: PathBuf,
    sheet: Rc<Sheet>,
    /// The sheets it `@import`s, in order (their rules come before its own).
    imports: Vec<Rc<SheetFile>>,
}

/// Where the declarations of one of a document's style sheets are written, and the directory
/// their URLs are relative to.
#[derive(Debug, Clone)]
pub(crate) struct Origin {
    pub(crate) source: SourceId,
    pub(crate) dir: PathBuf,
}

/// One document, read and styled.
pub(crate) struct Page<'a> {
    pub(crate) source: SourceId,
    pub(crate) rel: &'a Path,
    pub(crate) dir: PathBuf,
    pub(crate) text: &'a str,
    pub(crate) document: &'a html::Document,
    /// Indexed by a declaration's origin.
    pub(crate) origins: Vec<Origin>,
    /// Every sheet the document applies, in cascade order, with its origin.
    pub(crate) sheets: Vec<(Rc<Sheet>, usize)>,
    pub(crate) styles: Vec<Computed>,
    pub(crate) layout: layout::Layout,
}

impl Page<'_> {
    /// Where a declaration of `origin` is written and its URLs' directory.
    pub(crate) fn origin(&self, origin: usize) -> Origin {
        self.origins.get(origin).cloned().unwrap_or(Origin {
            source: self.source,
            dir: self.dir.clone(),
        })
    }
}

struct Auditor<'a> {
    root: &'a Path,
    spec: &'a AssetsSpec,
    device: Device,
    user_agent: Sheet,
    sources: Sources,
    files: HashMap<PathBuf, Option<Rc<FileInfo>>>,
    listings: HashMap<PathBuf, Vec<PathBuf>>,
    sheets: HashMap<PathBuf, Option<Rc<SheetFile>>>,
    checked_faces: HashSet<(SourceId, usize)>,
    findings: Vec<Finding>,
    images: BTreeSet<PathBuf>,
    fonts: BTreeSet<PathBuf>,
    pages: Vec<PageAssets>,
}

fn label(source: SourceId, span: &Range<usize>, text: impl Into<String>) -> Label {
    Label {
        loc: Loc::span(source, span.start, span.end),
        text: text.into(),
    }
}

impl Auditor<'_> {
    fn push(&mut self, rule: Rule, message: String, help: String, labels: Vec<Label>) {
        self.push_about(rule, None, message, help, labels);
    }

    fn push_about(
        &mut self,
        rule: Rule,
        asset: Option<&Path>,
        message: String,
        help: String,
        labels: Vec<Label>,
    ) {
        self.findings.push(Finding {
            rule,
            asset: asset.map(display),
            message,
            help,
            labels,
        });
    }

    fn info(&mut self, rel: &Path) -> Option<Rc<FileInfo>> {
        if let Some(known) = self.files.get(rel) {
            return known.clone();
        }
        let info = FileInfo::read(&self.root.join(rel)).map(Rc::new);
        self.files.insert(rel.to_path_buf(), info.clone());
        info
    }

    fn listing(&mut self, dir: &Path) -> Vec<PathBuf> {
        if let Some(known) = self.listings.get(dir) {
            return known.clone();
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.root.join(dir))
            .map(|entries| {
                entries
                    .flatten()
                    .map(|entry| dir.join(entry.file_name()))
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        self.listings.insert(dir.to_path_buf(), files.clone());
        files
    }

    /// Resolves and reads a referenced file, reporting it when it is missing or outside the
    /// folder. `None` when there is nothing to audit.
    fn referenced(
        &mut self,
        source: SourceId,
        dir: &Path,
        url: &str,
        span: &Range<usize>,
    ) -> Option<(PathBuf, Rc<FileInfo>)> {
        match resolve(dir, url)? {
            Target::Outside => {
                self.push(
                    Rule::MissingAsset,
                    format!("`{url}` points outside the audited folder"),
                    "reference files inside the built folder, as the server will serve it"
                        .to_owned(),
                    vec![label(source, span, "outside the folder")],
                );
                None
            }
            Target::Local(rel) => match self.info(&rel) {
                Some(info) => Some((rel, info)),
                None => {
                    self.push_about(
                        Rule::MissingAsset,
                        Some(&rel),
                        format!(
                            "`{url}` is not in the folder (looked for `{}`)",
                            display(&self.root.join(&rel))
                        ),
                        "fix the reference, or add the file to the build output".to_owned(),
                        vec![label(source, span, "no such file")],
                    );
                    None
                }
            },
        }
    }

    /// A style sheet file and the sheets it imports, read once.
    fn sheet_file(&mut self, rel: &Path, depth: usize) -> Option<Rc<SheetFile>> {
        if let Some(known) = self.sheets.get(rel) {
            return known.clone();
        }
        // A cycle of imports ends here: the sheet being read counts as not there.
        self.sheets.insert(rel.to_path_buf(), None);
        let path = self.root.join(rel);
        let bytes = std::fs::read(&path).ok()?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let sheet = Rc::new(style::parse(&text, 0));
        let source = self.sources.add(display(&path), text);
        let dir = dir_of(rel);
        let mut imports = Vec::new();
        if depth < 8 {
            for import in &sheet.imports {
                if let Some((imported, _)) =
                    self.referenced(source, &dir, &import.url, &import.span)
                    && let Some(file) = self.sheet_file(&imported, depth + 1)
                {
                    imports.push(file);
                }
            }
        }
        let file = Rc::new(SheetFile {
            source,
            dir,
            sheet,
            imports,
        });
        self.sheets
            .insert(rel.to_path_buf(), Some(Rc::clone(&file)));
        Some(file)
    }

    fn document(&mut self, rel: &Path) {
        let path = self.root.join(rel);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(_) => return,
        };
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let source = self.sources.add(display(&path), text.as_str());
        let dir = dir_of(rel);
        let document = match html::scan(&text) {
            Ok(scanned) => scanned,
            Err(error) => {
                self.push(
                    Rule::UnreadableAsset,
                    format!("`{}` could not be read as HTML: {error}", display(rel)),
                    "check that the file is HTML".to_owned(),
                    vec![label(source, &(0..0), "")],
                );
                return;
            }
        };
        let mut origins = Vec::new();
        let mut sheets: Vec<(Rc<Sheet>, usize)> = Vec::new();
        for sheet in &document.sheets {
            match sheet {
                SheetRef::Link(link) => {
                    let Some(href) = link.attr("href") else {
                        continue;
                    };
                    let (Some(url), Some(span)) = (href.value.clone(), href.value_span.clone())
                    else {
                        continue;
                    };
                    let Some((sheet_rel, _)) = self.referenced(source, &dir, &url, &span) else {
                        continue;
                    };
                    if let Some(file) = self.sheet_file(&sheet_rel, 0) {
                        add_sheet(&file, &mut origins, &mut sheets);
                    }
                }
                SheetRef::Inline(range) => {
                    let css = text.get(range.clone()).unwrap_or_default();
                    let sheet = style::parse(css, range.start);
                    origins.push(Origin {
                        source,
                        dir: dir.clone(),
                    });
                    sheets.push((Rc::new(sheet), origins.len() - 1));
                }
            }
        }
        let inputs: Vec<SheetInput<'_>> = sheets
            .iter()
            .map(|(sheet, origin)| SheetInput {
                sheet,
                origin: *origin,
            })
            .collect();
        let styles = cascade::compute(&document, &self.user_agent, &inputs, &text);
        let choices: Vec<Option<images::Choice>> = document
            .imgs
            .iter()
            .map(|img| self.choose(&text, &dir, &document, img))
            .collect();
        let natural: HashMap<usize, (f64, f64)> = document
            .imgs
            .iter()
            .zip(&choices)
            .filter_map(|(img, choice)| {
                let choice = choice.as_ref()?;
                let (w, h) = choice.file.as_ref()?.1.dimensions?;
                Some((
                    img.node,
                    (f64::from(w) / choice.density, f64::from(h) / choice.density),
                ))
            })
            .collect();
        let layout = layout::Layout::estimate(&document, &styles, &self.device, &|node| {
            natural.get(&node).copied()
        });
        let page = Page {
            source,
            rel,
            dir,
            text: &text,
            document: &document,
            origins,
            sheets,
            styles,
            layout,
        };
        let mut assets = PageAssets {
            path: display(rel),
            images: BTreeSet::new(),
            fonts: BTreeSet::new(),
        };
        self.images_of(&page, &choices, &mut assets);
        if let Some(lcp) = self.lcp(&page, &choices) {
            self.lcp_rules(&page, &lcp);
        }
        self.priorities(&page);
        self.fonts_of(&page, &mut assets);
        self.pages.push(assets);
    }

    fn finish(mut self, documents: usize) -> Report {
        // A style sheet linked by many documents is reported once per finding.
        // Rule, primary (file, offset) and message.
        type Key = (Rule, Option<(u32, u32)>, String);
        let mut seen: HashSet<Key> = HashSet::new();
        let mut findings: Vec<Finding> = Vec::new();
        for finding in std::mem::take(&mut self.findings) {
            let at = finding.labels.first().and_then(|label| {
                let range = label.loc.range()?;
                let id = label.loc.source()?;
                Some((
                    u32::try_from(id.index()).unwrap_or(u32::MAX),
                    u32::try_from(range.start).unwrap_or(u32::MAX),
                ))
            });
            let key = (finding.rule, at, finding.message.clone());
            if seen.insert(key) {
                findings.push(finding);
            }
        }
        let sources = &self.sources;
        findings.sort_by_cached_key(|finding| {
            let label = finding.labels.first();
            let file = label
                .and_then(|l| l.loc.source())
                .and_then(|id| sources.get(id))
                .map(|file| file.name().to_owned())
                .unwrap_or_default();
            let start = label
                .and_then(|l| l.loc.range())
                .map_or(0, |range| range.start);
            (file, start, finding.rule)
        });
        Report {
            folder: self.root.to_path_buf(),
            documents,
            images: self.images.len(),
            fonts: self.fonts.len(),
            findings,
            pages: self.pages,
            sources: self.sources,
        }
    }
}

/// Adds a sheet file, after the sheets it imports, to a document's cascade.
fn add_sheet(
    file: &Rc<SheetFile>,
    origins: &mut Vec<Origin>,
    sheets: &mut Vec<(Rc<Sheet>, usize)>,
) {
    for import in &file.imports {
        add_sheet(import, origins, sheets);
    }
    origins.push(Origin {
        source: file.source,
        dir: file.dir.clone(),
    });
    sheets.push((Rc::clone(&file.sheet), origins.len() - 1));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_the_language() {
        assert_eq!(size(512), "512b");
        assert_eq!(size(1024), "1kb");
        assert_eq!(size(45408), "44.3kb");
        assert_eq!(size(1536 * 1024), "1.5mb");
    }
}
