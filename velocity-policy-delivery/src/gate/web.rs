//! The front-end metrics of a static build folder (any bundler's output).
//!
//! Every `.html` file is a document. A document loads the files of its `<script src>`,
//! `<link rel="modulepreload" href>` and `<link rel="preload" as="script" href>`, and the static
//! imports of those (and of its inline module scripts), transitively; dynamic `import()` is not
//! followed. From that:
//!
//! - `baseline_js_kb`: the files every document loads, summed;
//! - `route_js_kb`: the largest total one document loads;
//! - `median_route_js_kb`: the median of the documents' totals (for an even count, the mean of
//!   the middle two, rounded down);
//! - `total_client_js_kb`: every `.js`, `.mjs` and `.cjs` file of the folder, loaded or not;
//! - `doc_html_kb`: the largest document.
//!
//! A compressed size is each file gzipped on its own at the best level, as a server sends it;
//! a total is the sum of its files' compressed sizes. URLs starting with `/` are relative to the
//! folder; others to the file they are written in; remote URLs and bare module names are left
//! out.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::Write as _;
use std::path::{Component, Path, PathBuf};

use velocity_policy_lang::{Compression, WebMetric};

use super::imports::static_imports;

/// A file's size as stored and gzipped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Size {
    pub(crate) raw: u64,
    pub(crate) gzip: u64,
}

impl Size {
    fn of(bytes: &[u8]) -> Size {
        Size {
            raw: bytes.len() as u64,
            gzip: gzip_len(bytes),
        }
    }

    pub(crate) fn get(self, compression: Compression) -> u64 {
        match compression {
            Compression::Gzip => self.gzip,
            _ => self.raw,
        }
    }
}

impl std::ops::Add for Size {
    type Output = Size;
    fn add(self, other: Size) -> Size {
        Size {
            raw: self.raw + other.raw,
            gzip: self.gzip + other.gzip,
        }
    }
}

/// The gzip size of `bytes` at the best level.
pub(crate) fn gzip_len(bytes: &[u8]) -> u64 {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    // Writing to a Vec cannot fail.
    let _ = encoder.write_all(bytes);
    encoder.finish().map_or(0, |out| out.len() as u64)
}

/// A local reference that points at no file.
#[derive(Debug, Clone)]
pub(crate) struct Unresolved {
    /// The URL or specifier as written.
    pub(crate) reference: String,
    /// The file it was written in, relative to the folder.
    pub(crate) from: String,
}

/// What a front-end build folder weighs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Site {
    /// Each document (relative path) with its size and the files it loads.
    pub(crate) documents: BTreeMap<String, (Size, BTreeSet<String>)>,
    /// Every file that was read, by relative path.
    pub(crate) files: BTreeMap<String, Size>,
    /// Every script file of the folder.
    pub(crate) scripts: BTreeSet<String>,
    /// Local references that point at no file.
    pub(crate) unresolved: Vec<Unresolved>,
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            walk(&path, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}

fn has_extension(path: &Path, extensions: &[&str]) -> bool {
    path.extension()
        .and_then(|ext| ext.to_str())
        .is_some_and(|ext| extensions.iter().any(|e| ext.eq_ignore_ascii_case(e)))
}

/// Resolves a URL or module specifier written in `from` (relative to the folder) to a path
/// relative to the folder; `None` for remote URLs, bare names and paths leaving the folder.
fn resolve(from: &str, reference: &str) -> Option<String> {
    let reference = reference.trim();
    let end = reference.find(['?', '#']).unwrap_or(reference.len());
    let reference = &reference[..end];
    if reference.is_empty()
        || reference.starts_with("//")
        || reference.contains(':')
        || !(reference.starts_with('/')
            || reference.starts_with('.')
            || from.ends_with(".html")
            || from.ends_with(".htm"))
    {
        // Remote (`https://`, `//cdn`), `data:` and `blob:` URLs, and bare module names
        // (which only an import map resolves). In HTML a plain `assets/x.js` is relative.
        return None;
    }
    let base: Vec<&str> = if reference.starts_with('/') {
        Vec::new()
    } else {
        let mut parts: Vec<&str> = from.split('/').collect();
        parts.pop();
        parts
    };
    let mut parts: Vec<String> = base.into_iter().map(str::to_owned).collect();
    for component in Path::new(reference.trim_start_matches('/')).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::ParentDir => {
                parts.pop()?;
            }
            _ => {}
        }
    }
    Some(parts.join("/"))
}

/// One attribute-bearing tag of an HTML document, with the text of a `<script>` body.
#[derive(Debug, Default)]
struct Tag {
    name: String,
    attributes: BTreeMap<String, String>,
    body: Option<String>,
}

/// The `<script>` and `<link>` tags of a document, comments skipped.
fn tags(html: &str) -> Vec<Tag> {
    let lower = html.to_ascii_lowercase();
    let mut tags = Vec::new();
    let mut pos = 0;
    while let Some(offset) = html.get(pos..).and_then(|rest| rest.find('<')) {
        pos += offset;
        if html[pos..].starts_with("<!--") {
            pos = lower[pos..]
                .find("-->")
                .map_or(html.len(), |end| pos + end + 3);
            continue;
        }
        pos += 1;
        let name_end = html[pos..]
            .find(|c: char| c.is_whitespace() || c == '>' || c == '/')
            .map_or(html.len(), |end| pos + end);
        let name = lower[pos..name_end].to_owned();
        let (attributes, end) = attributes(html, name_end);
        pos = end;
        let raw_text = name == "script" || name == "style";
        let body = if raw_text {
            let close = format!("</{name}");
            let body_end = lower[pos..]
                .find(&close)
                .map_or(html.len(), |end| pos + end);
            let body = html[pos..body_end].to_owned();
            pos = body_end;
            Some(body)
        } else {
            None
        };
        if name == "script" || name == "link" {
            tags.push(Tag {
                name,
                attributes,
                body,
            });
        }
    }
    tags
}

/// The attributes of a tag from `pos` (after its name) to its `>`, and where it ends.
fn attributes(html: &str, mut pos: usize) -> (BTreeMap<String, String>, usize) {
    let bytes = html.as_bytes();
    let mut attributes = BTreeMap::new();
    loop {
        while pos < bytes.len() && (bytes[pos].is_ascii_whitespace() || bytes[pos] == b'/') {
            pos += 1;
        }
        if pos >= bytes.len() {
            return (attributes, pos);
        }
        if bytes[pos] == b'>' {
            return (attributes, pos + 1);
        }
        let start = pos;
        while pos < bytes.len()
            && !bytes[pos].is_ascii_whitespace()
            && !matches!(bytes[pos], b'=' | b'>' | b'/')
        {
            pos += 1;
        }
        let name = html[start..pos].to_ascii_lowercase();
        if name.is_empty() {
            // A stray `=`: skip it.
            pos += 1;
            continue;
        }
        while pos < bytes.len() && bytes[pos].is_ascii_whitespace() {
            pos += 1;
        }
        let mut value = String::new();
        if pos < bytes.len() && bytes[pos] == b'=' {
            pos += 1;
            while pos < bytes.len() && bytes[pos].is_ascii_whitespace() {
                pos += 1;
            }
            match bytes.get(pos) {
                Some(&quote @ (b'"' | b'\'')) => {
                    let end = html[pos + 1..]
                        .find(char::from(quote))
                        .map_or(html.len(), |end| pos + 1 + end);
                    value = html[pos + 1..end].to_owned();
                    pos = (end + 1).min(html.len());
                }
                _ => {
                    let start = pos;
                    while pos < bytes.len()
                        && !bytes[pos].is_ascii_whitespace()
                        && bytes[pos] != b'>'
                    {
                        pos += 1;
                    }
                    value = html[start..pos].to_owned();
                }
            }
        }
        attributes.entry(name).or_insert(value);
    }
}

/// What a document asks for directly: URLs, and the specifiers of its inline module scripts.
fn document_references(html: &str) -> Vec<String> {
    let mut references = Vec::new();
    for tag in tags(html) {
        let attribute = |name: &str| tag.attributes.get(name).map(String::as_str);
        match tag.name.as_str() {
            "script" => match attribute("src") {
                Some(src) => references.push(src.to_owned()),
                None if attribute("type") == Some("module") => {
                    references.extend(static_imports(tag.body.as_deref().unwrap_or("")));
                }
                None => {}
            },
            _ => {
                let rel = attribute("rel").unwrap_or("").to_ascii_lowercase();
                let rels: Vec<&str> = rel.split_whitespace().collect();
                let script_preload = rels.contains(&"preload")
                    && attribute("as").is_some_and(|a| a.eq_ignore_ascii_case("script"));
                if rels.contains(&"modulepreload") || script_preload {
                    references.extend(attribute("href").map(str::to_owned));
                }
            }
        }
    }
    references
}

impl Site {
    /// Reads a build folder.
    pub(crate) fn read(dir: &Path) -> std::io::Result<Site> {
        let mut paths = Vec::new();
        walk(dir, &mut paths)?;
        let mut site = Site::default();
        let mut imports: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for path in &paths {
            let name = relative(dir, path);
            if has_extension(path, &["js", "mjs", "cjs"]) {
                site.scripts.insert(name.clone());
            }
            let is_document = has_extension(path, &["html", "htm"]);
            if !(is_document || site.scripts.contains(&name)) {
                continue;
            }
            let bytes = std::fs::read(path)?;
            site.files.insert(name.clone(), Size::of(&bytes));
            let text = String::from_utf8_lossy(&bytes);
            if is_document {
                imports.insert(name.clone(), document_references(&text));
                site.documents
                    .insert(name, (Size::of(&bytes), BTreeSet::new()));
            } else {
                imports.insert(name, static_imports(&text));
            }
        }
        let documents: Vec<String> = site.documents.keys().cloned().collect();
        for document in documents {
            let mut loaded = BTreeSet::new();
            let mut queue: VecDeque<String> = VecDeque::from([document.clone()]);
            while let Some(file) = queue.pop_front() {
                let references = imports.get(&file).cloned().unwrap_or_default();
                for reference in references {
                    let Some(target) = resolve(&file, &reference) else {
                        continue;
                    };
                    if !site.files.contains_key(&target) {
                        let path = dir.join(&target);
                        match std::fs::read(&path) {
                            Ok(bytes) if path.is_file() => {
                                site.files.insert(target.clone(), Size::of(&bytes));
                            }
                            _ => {
                                site.unresolved.push(Unresolved {
                                    reference,
                                    from: file.clone(),
                                });
                                continue;
                            }
                        }
                    }
                    if loaded.insert(target.clone()) {
                        queue.push_back(target);
                    }
                }
            }
            if let Some((_, set)) = site.documents.get_mut(&document) {
                *set = loaded;
            }
        }
        Ok(site)
    }

    fn total(&self, files: &BTreeSet<String>) -> Size {
        files
            .iter()
            .filter_map(|file| self.files.get(file))
            .fold(Size::default(), |a, b| a + *b)
    }

    /// The files every document loads.
    pub(crate) fn baseline(&self) -> BTreeSet<String> {
        let mut sets = self.documents.values().map(|(_, set)| set);
        let Some(first) = sets.next() else {
            return BTreeSet::new();
        };
        sets.fold(first.clone(), |common, set| {
            common.intersection(set).cloned().collect()
        })
    }

    /// A metric's value in bytes, or `None` when it needs documents and there are none.
    pub(crate) fn measure(&self, metric: WebMetric, compression: Compression) -> Option<u64> {
        let routes: Vec<u64> = self
            .documents
            .values()
            .map(|(_, set)| self.total(set).get(compression))
            .collect();
        match metric {
            WebMetric::TotalClientJs => Some(self.total(&self.scripts).get(compression)),
            _ if self.documents.is_empty() => None,
            WebMetric::BaselineJs => Some(self.total(&self.baseline()).get(compression)),
            WebMetric::RouteJs => routes.iter().copied().max(),
            WebMetric::MedianRouteJs => {
                let mut sorted = routes;
                sorted.sort_unstable();
                let middle = sorted.len() / 2;
                if sorted.len() % 2 == 1 {
                    sorted.get(middle).copied()
                } else {
                    Some((sorted[middle - 1] + sorted[middle]) / 2)
                }
            }
            WebMetric::DocHtml => self
                .documents
                .values()
                .map(|(size, _)| size.get(compression))
                .max(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_resolve_against_the_folder_or_the_file() {
        assert_eq!(
            resolve("index.html", "/assets/a.js").as_deref(),
            Some("assets/a.js")
        );
        assert_eq!(
            resolve("index.html", "assets/a.js?v=1#x").as_deref(),
            Some("assets/a.js")
        );
        assert_eq!(
            resolve("blog/index.html", "../assets/a.js").as_deref(),
            Some("assets/a.js")
        );
        assert_eq!(
            resolve("assets/a.js", "./b.js").as_deref(),
            Some("assets/b.js")
        );
        assert_eq!(resolve("assets/a.js", "../c.js").as_deref(), Some("c.js"));
        assert_eq!(resolve("index.html", "https://cdn.example/x.js"), None);
        assert_eq!(resolve("index.html", "//cdn.example/x.js"), None);
        assert_eq!(resolve("assets/a.js", "react"), None);
        assert_eq!(resolve("index.html", "../../outside.js"), None);
    }

    #[test]
    fn script_and_preload_tags_are_read_and_comments_skipped() {
        let html = r#"<!doctype html><html><head>
<!-- <script src="/commented.js"></script> -->
<link rel="stylesheet" href="/app.css">
<link rel=modulepreload href=/vendor.js>
<link rel="preload" as="script" href="/preloaded.js">
<link rel="preload" as="font" href="/font.woff2">
<SCRIPT type="module" crossorigin src='/entry.js'></SCRIPT>
<script type="module">import { go } from "/inline-dep.js"; go("<\/script>")</script>
<script>var classic = 'import "/not-a-module.js"';</script>
</head></html>"#;
        assert_eq!(
            document_references(html),
            ["/vendor.js", "/preloaded.js", "/entry.js", "/inline-dep.js"]
        );
    }
}
