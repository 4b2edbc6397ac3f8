//! The audit: every HTML document of a folder, the images and fonts it references, and the
//! rules of the [module docs](super).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io;
use std::ops::Range;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

use policy_lang::{AssetsSpec, Label, Loc, SourceId, Sources};

use super::css::{self, FontFace};
use super::html::{self, Element};
use super::media::{self, MediaType};
use super::report::{Finding, Report, Rule};

/// Raster files below this size are not worth converting: Lighthouse's `modern-image-formats`
/// reports nothing that would save less than 8 KiB, and a conversion cannot save more than the
/// whole file.
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

/// Directories deeper than this below the folder are not searched for documents.
const MAX_DEPTH: usize = 32;

/// Audits every `.html` and `.htm` document under `folder` (recursively, not following
/// symbolic links to directories) against `spec`, and the images and fonts they reference.
///
/// A reference is resolved as a browser would for a site served from `folder`: `/x` from the
/// folder, `x` from the referencing file's directory; query strings and fragments are ignored;
/// `http:`, `https:`, `//host` and `data:` URLs are not audited (their bytes are not here).
///
/// Only the folder itself failing to be read is an error: a file that is missing, truncated or
/// corrupt is a finding.
pub fn audit(folder: &Path, spec: &AssetsSpec) -> io::Result<Report> {
    let mut documents = Vec::new();
    walk(folder, Path::new(""), 0, &mut documents)?;
    documents.sort();
    let mut auditor = Auditor {
        root: folder,
        spec,
        sources: Sources::new(),
        files: HashMap::new(),
        listings: HashMap::new(),
        sheets: HashMap::new(),
        checked_faces: HashSet::new(),
        findings: Vec::new(),
        images: BTreeSet::new(),
        fonts: BTreeSet::new(),
    };
    for document in &documents {
        auditor.document(document);
    }
    Ok(auditor.finish(documents.len()))
}

fn walk(root: &Path, rel: &Path, depth: usize, out: &mut Vec<PathBuf>) -> io::Result<()> {
    let dir = root.join(rel);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        // Only the folder itself must be readable; an unreadable subfolder is skipped.
        Err(error) if depth == 0 => return Err(error),
        Err(_) => return Ok(()),
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = rel.join(entry.file_name());
        if kind.is_dir() {
            if depth < MAX_DEPTH {
                walk(root, &path, depth + 1, out)?;
            }
        } else if path
            .extension()
            .is_some_and(|ext| ext.eq_ignore_ascii_case("html") || ext.eq_ignore_ascii_case("htm"))
            && root.join(&path).is_file()
        {
            out.push(path);
        }
    }
    Ok(())
}

/// Where a reference points.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// A file below the folder (relative path, normalised).
    Local(PathBuf),
    /// Above the folder (`../../x.png`).
    Outside,
}

/// Resolves `url`, written in a file in folder-relative directory `dir`. `None` for what is
/// not audited: empty, `data:`, other schemes, `//host`.
fn resolve(dir: &Path, url: &str) -> Option<Target> {
    let url = url.trim();
    let url = url.split(['#', '?']).next().unwrap_or_default();
    if url.is_empty() || url.starts_with("//") || has_scheme(url) {
        return None;
    }
    let decoded = percent_decode(url);
    let (base, path) = match decoded.strip_prefix('/') {
        Some(rooted) => (PathBuf::new(), rooted.to_owned()),
        None => (dir.to_path_buf(), decoded),
    };
    let mut resolved = base;
    for component in Path::new(&path).components() {
        match component {
            Component::Normal(part) => resolved.push(part),
            Component::ParentDir => {
                if !resolved.pop() {
                    return Some(Target::Outside);
                }
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    Some(Target::Local(resolved))
}

fn has_scheme(url: &str) -> bool {
    let Some(colon) = url.find(':') else {
        return false;
    };
    let scheme = &url[..colon];
    scheme
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// `%20` and friends decoded; invalid escapes stay as written, invalid UTF-8 becomes U+FFFD.
fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

/// What the audit knows about one file.
#[derive(Debug)]
struct FileInfo {
    len: u64,
    kind: MediaType,
    /// Width and height, for readable raster images.
    dimensions: Option<(u32, u32)>,
    /// Why it cannot be used, if it cannot.
    problem: Option<String>,
}

impl FileInfo {
    fn read(path: &Path) -> Option<FileInfo> {
        if !path.is_file() {
            return None;
        }
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(error) => {
                return Some(FileInfo {
                    len: 0,
                    kind: MediaType::Unknown,
                    dimensions: None,
                    problem: Some(format!("it cannot be read: {error}")),
                });
            }
        };
        let kind = MediaType::sniff(&bytes);
        let mut problem = media::check_integrity(kind, &bytes).err();
        let mut dimensions = None;
        if kind.is_raster() && problem.is_none() {
            match media::dimensions(&bytes) {
                Ok(found) => dimensions = Some(found),
                Err(error) => problem = Some(error),
            }
        }
        Some(FileInfo {
            len: bytes.len() as u64,
            kind,
            dimensions,
            problem,
        })
    }
}

/// A style sheet read once, however many documents link it.
#[derive(Debug)]
struct Sheet {
    source: SourceId,
    dir: PathBuf,
    faces: Vec<FontFace>,
}

/// An `@font-face` as one document sees it: where it is written, and the directory its URLs are
/// relative to.
#[derive(Debug, Clone)]
struct FaceRef {
    source: SourceId,
    dir: PathBuf,
    face: FontFace,
}

struct Auditor<'a> {
    root: &'a Path,
    spec: &'a AssetsSpec,
    sources: Sources,
    files: HashMap<PathBuf, Option<Rc<FileInfo>>>,
    listings: HashMap<PathBuf, Vec<PathBuf>>,
    sheets: HashMap<PathBuf, Option<Rc<Sheet>>>,
    checked_faces: HashSet<(SourceId, usize)>,
    findings: Vec<Finding>,
    images: BTreeSet<PathBuf>,
    fonts: BTreeSet<PathBuf>,
}

fn label(source: SourceId, span: &Range<usize>, text: impl Into<String>) -> Label {
    Label {
        loc: Loc::span(source, span.start, span.end),
        text: text.into(),
    }
}

fn display(path: &Path) -> String {
    path.to_string_lossy().replace('\\', "/")
}

fn dir_of(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// Parses an HTML dimension attribute the way browsers do for `width`/`height`: leading
/// digits, an optional fraction; `None` for a percentage or no number at all.
fn dimension(value: &str) -> Option<f64> {
    let value = value.trim_start();
    let end = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(value.len());
    let (number, rest) = value.split_at(end);
    if rest.starts_with('%') {
        return None;
    }
    number.parse::<f64>().ok().filter(|n| n.is_finite())
}

/// The `style` attribute's declarations that size an element: width, height, aspect-ratio.
fn inline_sizes(element: &Element) -> (bool, bool, bool) {
    let Some(style) = element.value("style") else {
        return (false, false, false);
    };
    let (mut width, mut height, mut ratio) = (false, false, false);
    for declaration in style.split(';') {
        let Some((name, value)) = declaration.split_once(':') else {
            continue;
        };
        let value = value.trim().to_ascii_lowercase();
        if value.is_empty() || value.starts_with("auto") {
            continue;
        }
        match name.trim().to_ascii_lowercase().as_str() {
            "width" => width = true,
            "height" => height = true,
            "aspect-ratio" => ratio = true,
            _ => {}
        }
    }
    (width, height, ratio)
}

impl Auditor<'_> {
    fn push(&mut self, rule: Rule, message: String, help: String, labels: Vec<Label>) {
        self.findings.push(Finding {
            rule,
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
                    self.push(
                        Rule::MissingAsset,
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

    /// A referenced image: missing, unreadable and oversized are reported here. Returns the
    /// file when it is a readable image.
    fn image(
        &mut self,
        source: SourceId,
        dir: &Path,
        url: &str,
        span: &Range<usize>,
    ) -> Option<(PathBuf, Rc<FileInfo>)> {
        let (rel, info) = self.referenced(source, dir, url, span)?;
        let name = display(&rel);
        if let Some(problem) = &info.problem {
            self.push(
                Rule::UnreadableAsset,
                format!("`{name}` is a damaged {}: {problem}", info.kind),
                "rebuild or re-export the file; a browser shows a broken image or nothing"
                    .to_owned(),
                vec![label(source, span, "cannot be read")],
            );
            return None;
        }
        if !info.kind.is_image() {
            self.push(
                Rule::UnreadableAsset,
                format!("`{name}` is {} by its bytes, not an image", info.kind),
                "point at a PNG, JPEG, GIF, WebP, AVIF or SVG file".to_owned(),
                vec![label(source, span, "not an image")],
            );
            return None;
        }
        self.images.insert(rel.clone());
        if info.len > self.spec.max_image.value {
            self.push(
                Rule::OptimizedImages,
                format!(
                    "`{name}` is {}, over the {} ceiling",
                    size(info.len),
                    size(self.spec.max_image.value)
                ),
                "compress it (AVIF or WebP at a lower quality), or resize it to the largest size it is displayed at".to_owned(),
                vec![label(source, span, format!("{} image", size(info.len)))],
            );
        }
        Some((rel, info))
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
        let scanned = match html::scan(&text) {
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
        self.images_of(source, &dir, &scanned);
        self.priorities(source, &scanned);
        self.fonts_of(source, &dir, &text, &scanned);
    }

    // ---- images -------------------------------------------------------------------------

    fn images_of(&mut self, source: SourceId, dir: &Path, document: &html::Document) {
        let mut first_large_seen = false;
        for img in &document.imgs {
            let element = &img.element;
            let main = element.attr("src").and_then(|src| {
                let url = src.value.clone()?;
                let span = src.value_span.clone().unwrap_or_else(|| src.span.clone());
                Some((url, span))
            });
            let main_file = main
                .as_ref()
                .and_then(|(url, span)| self.image(source, dir, url, span));
            let main_target = main.as_ref().and_then(|(url, _)| resolve(dir, url));

            // Every other file the element may load, and whether one is AVIF or WebP.
            let mut modern_alternative = false;
            let mut has_srcset = false;
            let mut width_descriptors_without_sizes = None;
            let sources = img
                .picture
                .and_then(|i| document.pictures.get(i))
                .map_or(&[][..], Vec::as_slice);
            for candidate_element in sources.iter().chain(std::iter::once(element)) {
                let Some(srcset) = candidate_element.attr("srcset") else {
                    continue;
                };
                let (Some(raw_span), true) = (srcset.value_span.clone(), srcset.value.is_some())
                else {
                    continue;
                };
                let raw = self
                    .sources
                    .get(source)
                    .and_then(|file| file.text().get(raw_span.clone()))
                    .unwrap_or_default()
                    .to_owned();
                let candidates = html::srcset(&raw, raw_span.start);
                // One candidate is one size for every screen.
                has_srcset |= candidates.len() > 1;
                let typed_modern = candidate_element.value("type").is_some_and(|t| {
                    let t = t.trim().to_ascii_lowercase();
                    t == "image/avif" || t == "image/webp"
                });
                for candidate in &candidates {
                    let target = resolve(dir, &candidate.url);
                    if target.is_some() && target == main_target {
                        // The `src` again, already checked.
                        continue;
                    }
                    match self.image(source, dir, &candidate.url, &candidate.span) {
                        Some((_, info)) => modern_alternative |= info.kind.is_modern_image(),
                        // Not audited (another host): trust the declared type.
                        None if resolve(dir, &candidate.url).is_none() => {
                            modern_alternative |= typed_modern;
                        }
                        None => {}
                    }
                }
                if candidates.iter().any(|c| c.descriptor.ends_with('w'))
                    && candidate_element.attr("sizes").is_none()
                    && element.attr("sizes").is_none()
                {
                    width_descriptors_without_sizes = Some(srcset.span.clone());
                }
            }

            self.intrinsic_size(source, element, main_file.as_ref());
            let Some((rel, info)) = main_file else {
                continue;
            };
            self.aspect_ratio(source, element, &rel, &info);
            if info.kind.is_raster()
                && !info.kind.is_modern_image()
                && info.len >= MODERN_FORMAT_MIN_BYTES
                && !modern_alternative
            {
                self.modern_formats(source, element, &rel, &info);
            }
            let large = info.kind.is_raster() && info.len >= self.spec.large_image.value;
            if large && !has_srcset {
                self.push(
                    Rule::ResponsiveImages,
                    format!(
                        "`{}` is {} and has no `srcset` of several sizes: every screen downloads the largest",
                        display(&rel),
                        size(info.len)
                    ),
                    "add smaller widths with `srcset` and say how wide it is shown with `sizes`, e.g. `srcset=\"hero-640.webp 640w, hero-1280.webp 1280w\" sizes=\"(max-width: 640px) 100vw, 50vw\"`".to_owned(),
                    vec![label(source, &element.span, "large image, one size")],
                );
            }
            if let Some(span) = width_descriptors_without_sizes {
                self.push(
                    Rule::ResponsiveImages,
                    "`srcset` with width descriptors but no `sizes`: the browser assumes the image fills the viewport".to_owned(),
                    "add `sizes` with the width the image is shown at, e.g. `sizes=\"(max-width: 640px) 100vw, 50vw\"`".to_owned(),
                    vec![label(source, &span, "no `sizes` for these widths")],
                );
            }
            if large && !first_large_seen {
                first_large_seen = true;
                let lazy = element
                    .value("loading")
                    .is_some_and(|v| v.trim().eq_ignore_ascii_case("lazy"));
                if lazy {
                    self.push(
                        Rule::LcpLazyLoaded,
                        format!(
                            "`{}` is the first large image, likely the largest contentful paint, and it is lazy-loaded",
                            display(&rel)
                        ),
                        "remove `loading=\"lazy\"` from it (and consider `fetchpriority=\"high\"`); lazy-load the images further down instead".to_owned(),
                        vec![
                            label(source, &element.span_of("loading"), "waits for layout"),
                        ],
                    );
                }
            }
        }
    }

    fn intrinsic_size(
        &mut self,
        source: SourceId,
        element: &Element,
        file: Option<&(PathBuf, Rc<FileInfo>)>,
    ) {
        let (css_width, css_height, css_ratio) = inline_sizes(element);
        let width = element.value("width").and_then(dimension).is_some() || css_width;
        let height = element.value("height").and_then(dimension).is_some() || css_height;
        if (width && height) || (css_ratio && (width || height)) {
            return;
        }
        let missing = match (width, height) {
            (false, false) => "`width` and `height`",
            (true, false) => "`height`",
            _ => "`width`",
        };
        let invalid = ["width", "height"]
            .into_iter()
            .filter(|name| {
                element
                    .value(name)
                    .is_some_and(|value| dimension(value).is_none())
            })
            .map(|name| format!(" (`{name}` must be a number of pixels)"))
            .next()
            .unwrap_or_default();
        let help = match file.and_then(|(_, info)| info.dimensions) {
            Some((w, h)) => format!(
                "add `width=\"{w}\" height=\"{h}\"` (the file's size; any pair with the same ratio reserves the space, and CSS may still scale it)"
            ),
            None => "add `width` and `height` attributes with the image's size in pixels, so the browser reserves its space before it loads".to_owned(),
        };
        self.push(
            Rule::UnsizedImages,
            format!("`<img>` without {missing}: the page shifts when it loads{invalid}"),
            help,
            vec![label(source, &element.span, "no intrinsic size")],
        );
    }

    fn aspect_ratio(&mut self, source: SourceId, element: &Element, rel: &Path, info: &FileInfo) {
        let (Some((natural_w, natural_h)), Some(width), Some(height)) = (
            info.dimensions,
            element.value("width").and_then(dimension),
            element.value("height").and_then(dimension),
        ) else {
            return;
        };
        if width <= 0.0 || height <= 0.0 {
            return;
        }
        let ratio = f64::from(natural_w) / f64::from(natural_h);
        let expected_height = width / ratio;
        if (expected_height - height).abs() < ASPECT_RATIO_TOLERANCE_PX {
            return;
        }
        let mut labels = vec![label(
            source,
            &element.span_of("width"),
            format!("{width}×{height} declared"),
        )];
        if let Some(attr) = element.attr("height") {
            labels.push(label(source, &attr.span, ""));
        }
        self.push(
            Rule::ImageAspectRatio,
            format!(
                "declared {width}×{height} (ratio {:.2}) but `{}` is {natural_w}×{natural_h} (ratio {ratio:.2})",
                width / height,
                display(rel)
            ),
            format!(
                "the image is stretched: for `width=\"{width}\"` write `height=\"{}\"`, or crop the file to the shape it is shown at",
                expected_height.round()
            ),
            labels,
        );
    }

    fn modern_formats(&mut self, source: SourceId, element: &Element, rel: &Path, info: &FileInfo) {
        // A sibling with the same stem that is AVIF or WebP by its bytes is an alternative the
        // server can negotiate.
        let stem = rel.file_stem().map(|s| s.to_os_string());
        let siblings = self.listing(&dir_of(rel));
        for sibling in siblings {
            if sibling.as_path() == rel || sibling.file_stem().map(|s| s.to_os_string()) != stem {
                continue;
            }
            if self
                .info(&sibling)
                .is_some_and(|sibling| sibling.problem.is_none() && sibling.kind.is_modern_image())
            {
                return;
            }
        }
        let named_modern = rel.extension().is_some_and(|ext| {
            ext.eq_ignore_ascii_case("webp") || ext.eq_ignore_ascii_case("avif")
        });
        let note = if named_modern {
            " (by its bytes, whatever its name says)"
        } else {
            ""
        };
        let stem = rel
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.push(
            Rule::ModernImageFormats,
            format!(
                "`{}` is a {}{note} with no AVIF or WebP alternative",
                display(rel),
                info.kind
            ),
            format!(
                "serve `{stem}.avif` or `{stem}.webp` next to it, or wrap it in `<picture>` with a `<source type=\"image/avif\">`: the modern formats are usually much smaller"
            ),
            vec![label(
                source,
                &element
                    .attr("src")
                    .and_then(|a| a.value_span.clone())
                    .unwrap_or_else(|| element.span.clone()),
                format!("{} only", info.kind),
            )],
        );
    }

    // ---- priority -----------------------------------------------------------------------

    fn priorities(&mut self, source: SourceId, document: &html::Document) {
        let max = self.spec.max_high_priority.value as usize;
        if document.high_priority.len() > max {
            let mut labels: Vec<Label> = document
                .high_priority
                .iter()
                .skip(max)
                .map(|element| label(source, &element.span_of("fetchpriority"), "high"))
                .collect();
            if let Some(first) = labels.first_mut() {
                first.text = format!("one more than the {max} allowed");
            }
            labels.extend(
                document
                    .high_priority
                    .iter()
                    .take(max)
                    .map(|element| label(source, &element.span_of("fetchpriority"), "high")),
            );
            self.push(
                Rule::TooManyHighPriority,
                format!(
                    "{} elements with `fetchpriority=\"high\"`, more than {max}",
                    document.high_priority.len()
                ),
                "marking everything priority is the same as marking nothing: keep `fetchpriority=\"high\"` on the likely largest contentful paint image, remove it from the rest".to_owned(),
                labels,
            );
        }
        let max = self.spec.max_preloads.value as usize;
        if document.preloads.len() > max {
            let labels = document
                .preloads
                .iter()
                .skip(max)
                .enumerate()
                .map(|(i, element)| {
                    let text = if i == 0 {
                        format!("one more than the {max} allowed")
                    } else {
                        "preload".to_owned()
                    };
                    label(source, &element.span, text)
                })
                .collect();
            self.push(
                Rule::TooManyPreloads,
                format!(
                    "{} `<link rel=\"preload\">`, more than {max}",
                    document.preloads.len()
                ),
                "each preload competes with the page's critical requests: preload only what the first paint needs and is discovered late (the hero image, one font)".to_owned(),
                labels,
            );
        }
    }

    // ---- fonts --------------------------------------------------------------------------

    fn sheet(&mut self, rel: &Path) -> Option<Rc<Sheet>> {
        if let Some(known) = self.sheets.get(rel) {
            return known.clone();
        }
        let path = self.root.join(rel);
        let sheet = std::fs::read(&path).ok().map(|bytes| {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let faces = css::font_faces(&text, 0);
            let source = self.sources.add(display(&path), text);
            Rc::new(Sheet {
                source,
                dir: dir_of(rel),
                faces,
            })
        });
        self.sheets.insert(rel.to_path_buf(), sheet.clone());
        sheet
    }

    fn fonts_of(&mut self, source: SourceId, dir: &Path, text: &str, document: &html::Document) {
        let mut faces: Vec<FaceRef> = Vec::new();
        for range in &document.styles {
            let css = text.get(range.clone()).unwrap_or_default();
            faces.extend(
                css::font_faces(css, range.start)
                    .into_iter()
                    .map(|face| FaceRef {
                        source,
                        dir: dir.to_path_buf(),
                        face,
                    }),
            );
        }
        for link in &document.stylesheets {
            let Some(href) = link.attr("href") else {
                continue;
            };
            let (Some(url), Some(span)) = (href.value.clone(), href.value_span.clone()) else {
                continue;
            };
            let Some((rel, _)) = self.referenced(source, dir, &url, &span) else {
                continue;
            };
            if let Some(sheet) = self.sheet(&rel) {
                faces.extend(sheet.faces.iter().map(|face| FaceRef {
                    source: sheet.source,
                    dir: sheet.dir.clone(),
                    face: face.clone(),
                }));
            }
        }
        for preload in &document.preloads {
            let is_font = preload
                .value("as")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("font"));
            if let (true, Some(href)) = (is_font, preload.attr("href"))
                && let (Some(url), Some(span)) = (href.value.clone(), href.value_span.clone())
            {
                self.font(source, dir, &url, &span, None);
            }
        }
        for face in &faces {
            if self
                .checked_faces
                .insert((face.source, face.face.span.start))
            {
                self.face(face);
            }
        }
        self.font_counts(source, &faces);
    }

    /// The checks of one `@font-face`, wherever it is written: run once.
    fn face(&mut self, face: &FaceRef) {
        let family = face.face.family.clone().unwrap_or_default();
        match &face.face.display {
            Some(display) if matches!(display.value.as_str(), "swap" | "optional" | "fallback") => {
            }
            Some(display) => self.push(
                Rule::FontDisplay,
                format!(
                    "`font-display: {}` for `{family}` hides text while the font loads",
                    display.value
                ),
                "use `font-display: swap` (text shows at once in a fallback font) or `optional` (the font is used only if it is already there)".to_owned(),
                vec![label(face.source, &display.span, "invisible text")],
            ),
            None => self.push(
                Rule::FontDisplay,
                format!(
                    "`@font-face` for `{family}` has no `font-display`: text is invisible while the font loads"
                ),
                "add `font-display: swap` (text shows at once in a fallback font) or `optional` (the font is used only if it is already there)".to_owned(),
                vec![label(face.source, &face.face.span, "no `font-display`")],
            ),
        }
        if let Some(first) = face.face.sources.first() {
            let first = first.clone();
            self.font(
                face.source,
                &face.dir,
                &first.url,
                &first.span,
                first.format.as_deref(),
            );
        }
    }

    /// A font file a browser downloads: missing, unreadable, format and size.
    fn font(
        &mut self,
        source: SourceId,
        dir: &Path,
        url: &str,
        span: &Range<usize>,
        format_hint: Option<&str>,
    ) {
        let Some((rel, info)) = self.referenced(source, dir, url, span) else {
            return;
        };
        let name = display(&rel);
        if let Some(problem) = &info.problem {
            self.push(
                Rule::UnreadableAsset,
                format!("`{name}` is a damaged {}: {problem}", info.kind),
                "rebuild or re-export the font; a browser falls back to the next font".to_owned(),
                vec![label(source, span, "cannot be read")],
            );
            return;
        }
        if !info.kind.is_font() {
            self.push(
                Rule::UnreadableAsset,
                format!("`{name}` is {} by its bytes, not a font", info.kind),
                "point at a WOFF2 file".to_owned(),
                vec![label(source, span, "not a font")],
            );
            return;
        }
        self.fonts.insert(rel.clone());
        if info.kind != MediaType::Woff2 {
            let hint = match format_hint {
                Some(hint) if hint != "woff2" => format!(", as its `format(\"{hint}\")` says"),
                Some(_) => " (its `format(\"woff2\")` hint is wrong)".to_owned(),
                None => String::new(),
            };
            self.push(
                Rule::FontFormat,
                format!("`{name}` is {}{hint}, not WOFF2", info.kind),
                "convert it to WOFF2 (`woff2_compress`, or fonttools with `flavor=\"woff2\"`) and list it first: it is the smallest font format and every current browser reads it".to_owned(),
                vec![label(source, span, info.kind.name())],
            );
        }
        if info.len > self.spec.max_font.value {
            self.push(
                Rule::FontSize,
                format!(
                    "`{name}` is {}, over the {} ceiling",
                    size(info.len),
                    size(self.spec.max_font.value)
                ),
                "subset it to the characters the site uses (`pyftsubset --unicodes=...`), or drop axes and weights it does not need".to_owned(),
                vec![label(source, span, format!("{} font", size(info.len)))],
            );
        }
    }

    /// Font files and weights per family, as one document loads them.
    fn font_counts(&mut self, document: SourceId, faces: &[FaceRef]) {
        let name = self
            .sources
            .get(document)
            .map(|file| file.name().to_owned())
            .unwrap_or_default();
        let downloadable: Vec<&FaceRef> = faces
            .iter()
            .filter(|face| !face.face.sources.is_empty())
            .collect();
        let max = self.spec.max_font_files.value as usize;
        if let Some(excess) = downloadable.get(max) {
            self.push(
                Rule::TooManyFontFiles,
                format!(
                    "`{name}` loads {} font files, more than {max}",
                    downloadable.len()
                ),
                "every face is a request that can delay text: use fewer families and weights, or one variable font".to_owned(),
                vec![label(
                    excess.source,
                    &excess.face.span,
                    format!("font file {} of {}", max + 1, downloadable.len()),
                )],
            );
        }
        let max = self.spec.max_font_weights.value as usize;
        let mut weights: Vec<(String, Vec<String>)> = Vec::new();
        for face in &downloadable {
            let family = face.face.family.clone().unwrap_or_default();
            let weight = face.face.weight.clone().unwrap_or_else(|| "400".to_owned());
            let index = match weights
                .iter()
                .position(|(f, _)| f.eq_ignore_ascii_case(&family))
            {
                Some(index) => index,
                None => {
                    weights.push((family.clone(), Vec::new()));
                    weights.len() - 1
                }
            };
            let Some((_, seen)) = weights.get_mut(index) else {
                continue;
            };
            if seen.contains(&weight) {
                continue;
            }
            seen.push(weight.clone());
            if seen.len() == max + 1 {
                let count = downloadable
                    .iter()
                    .filter(|f| {
                        f.face
                            .family
                            .as_deref()
                            .unwrap_or_default()
                            .eq_ignore_ascii_case(&family)
                    })
                    .filter_map(|f| f.face.weight.clone().or_else(|| Some("400".to_owned())))
                    .collect::<BTreeSet<_>>()
                    .len();
                self.push(
                    Rule::TooManyFontWeights,
                    format!("`{name}` loads {count} weights of `{family}`, more than {max}"),
                    "each weight is another file: keep regular and bold, let the browser synthesise the rest, or use one variable font (`font-weight: 100 900`)".to_owned(),
                    vec![label(
                        face.source,
                        &face.face.span,
                        format!("weight {weight}, one too many"),
                    )],
                );
            }
        }
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
            sources: self.sources,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_resolve_like_a_browser() {
        let dir = Path::new("blog");
        let local = |p: &str| Some(Target::Local(PathBuf::from(p)));
        assert_eq!(resolve(dir, "img/a.png"), local("blog/img/a.png"));
        assert_eq!(resolve(dir, "/img/a.png?v=3#x"), local("img/a.png"));
        assert_eq!(resolve(dir, "./a%20b.png"), local("blog/a b.png"));
        assert_eq!(resolve(dir, "../a.png"), local("a.png"));
        assert_eq!(resolve(dir, "../../a.png"), Some(Target::Outside));
        assert_eq!(resolve(dir, "https://cdn.example/a.png"), None);
        assert_eq!(resolve(dir, "//cdn.example/a.png"), None);
        assert_eq!(resolve(dir, "data:image/png;base64,xyz"), None);
        assert_eq!(resolve(dir, "  "), None);
        assert_eq!(resolve(dir, "a:b.png"), None);
        assert_eq!(resolve(dir, "%zz.png"), local("blog/%zz.png"));
    }

    #[test]
    fn sizes_read_like_the_language() {
        assert_eq!(size(512), "512b");
        assert_eq!(size(1024), "1kb");
        assert_eq!(size(45408), "44.3kb");
        assert_eq!(size(1536 * 1024), "1.5mb");
    }

    #[test]
    fn dimensions_parse_like_attributes() {
        assert_eq!(dimension("640"), Some(640.0));
        assert_eq!(dimension(" 640px"), Some(640.0));
        assert_eq!(dimension("50%"), None);
        assert_eq!(dimension("auto"), None);
        assert_eq!(dimension(""), None);
    }
}
