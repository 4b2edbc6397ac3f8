//! Finding the documents of a folder, resolving the references they make as a browser would
//! (with [`crate::site`], as the image-dimensions layer does), and reading what a
//! referenced file is.

use std::io;
use std::path::{Path, PathBuf};

use crate::site::Reference;

use crate::assets::media::{self, MediaType, jpeg};

/// Directories deeper than this below the folder are not searched for documents.
const MAX_DEPTH: usize = 32;

/// Every `.html` and `.htm` document under `root` (relative paths, sorted), not following
/// symbolic links to directories. Only `root` itself failing to be read is an error.
pub(crate) fn documents(root: &Path) -> io::Result<Vec<PathBuf>> {
    let mut documents = Vec::new();
    walk(root, Path::new(""), 0, &mut documents)?;
    documents.sort();
    Ok(documents)
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
pub(crate) enum Target {
    /// A file below the folder (relative path, normalised).
    Local(PathBuf),
    /// Above the folder (`../../x.png`).
    Outside,
}

/// Resolves `url`, written in a file in folder-relative directory `dir`, as a browser would for
/// a site served from the folder: `/x` from the folder, `x` from `dir`; query strings and
/// fragments dropped; `%20` decoded. `None` for what is not a file of the folder: empty,
/// `data:`, other schemes, `//host`. The reading is [`crate::site`]'s, which the
/// image-dimensions layer shares.
pub(crate) fn resolve(dir: &Path, url: &str) -> Option<Target> {
    let reference = Reference::parse(url)?;
    Some(
        reference
            .in_folder(dir)
            .map_or(Target::Outside, Target::Local),
    )
}

/// What the audit knows about one file.
#[derive(Debug)]
pub(crate) struct FileInfo {
    pub(crate) len: u64,
    pub(crate) kind: MediaType,
    /// Width and height, for readable raster images.
    pub(crate) dimensions: Option<(u32, u32)>,
    /// How a readable JPEG was encoded.
    pub(crate) jpeg: Option<jpeg::JpegInfo>,
    /// A PNG in true colour (RGB or RGBA), not a palette or greyscale one.
    pub(crate) png_truecolor: bool,
    /// Why it cannot be used, if it cannot.
    pub(crate) problem: Option<String>,
}

impl FileInfo {
    /// Reads `path`; `None` when there is no such file.
    pub(crate) fn read(path: &Path) -> Option<FileInfo> {
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
                    jpeg: None,
                    png_truecolor: false,
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
        if kind == MediaType::Svg {
            dimensions = svg_size(&bytes);
        }
        let jpeg = (kind == MediaType::Jpeg && problem.is_none())
            .then(|| jpeg::read(&bytes))
            .flatten();
        // The IHDR's colour type: 2 is RGB, 6 RGBA.
        let png_truecolor = kind == MediaType::Png && matches!(bytes.get(25), Some(2 | 6));
        Some(FileInfo {
            len: bytes.len() as u64,
            kind,
            dimensions,
            jpeg,
            png_truecolor,
            problem,
        })
    }
}

/// An SVG's intrinsic size: its root element's `width` and `height` in pixels, or its
/// `viewBox`'s.
fn svg_size(bytes: &[u8]) -> Option<(u32, u32)> {
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]);
    let start = head.find("<svg")?;
    let end = start + head[start..].find('>')?;
    let attrs = crate::assets::html::attributes(&head[start..=end], 0);
    let value = |name: &str| {
        attrs
            .iter()
            .find(|a| a.name == name)
            .and_then(|a| a.value.clone())
    };
    let px = |v: Option<String>| -> Option<f64> {
        let v = v?;
        let v = v.trim().trim_end_matches("px");
        v.parse::<f64>().ok().filter(|n| *n > 0.0)
    };
    let (w, h) = match (px(value("width")), px(value("height"))) {
        (Some(w), Some(h)) => (w, h),
        _ => {
            let view_box = value("viewbox")?;
            let numbers: Vec<f64> = view_box
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter_map(|n| n.parse().ok())
                .collect();
            match numbers.as_slice() {
                [_, _, w, h] if *w > 0.0 && *h > 0.0 => (*w, *h),
                _ => return None,
            }
        }
    };
    Some((w.round().max(1.0) as u32, h.round().max(1.0) as u32))
}

/// A folder-relative path with `/` separators, as a finding names it.
pub(crate) fn display(path: &Path) -> String {
    path.to_string_lossy().replace('\\', "/")
}

/// The folder-relative directory of a folder-relative file.
pub(crate) fn dir_of(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
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
}
