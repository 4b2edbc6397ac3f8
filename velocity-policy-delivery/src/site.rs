//! URLs written in a page, resolved to the file they name on the same site: what the asset
//! audit (`policy assets`, against a folder) and the image-dimensions layer (against a request
//! path) each need, written once.
//!
//! A reference is read as a browser reads it: surrounding spaces, the query string and the
//! fragment are ignored; `http:`, `data:`, any other scheme and `//host` are not this site's
//! files; `%20` and friends are decoded; `.`, empty segments and `..` are folded. `/x` is from
//! the site's root, `x` from the page's directory.
//!
//! ```
//! use std::path::{Path, PathBuf};
//! use velocity_policy_delivery::site::Reference;
//!
//! let hero = Reference::parse("../img/hero%20wide.png?v=3#top").unwrap();
//! // On a page served at `/blog/post.html`:
//! assert_eq!(hero.in_url_dir("/blog/"), "/img/hero wide.png");
//! // In a page `blog/post.html` of a folder:
//! assert_eq!(hero.in_folder(Path::new("blog")), Some(PathBuf::from("img/hero wide.png")));
//! // Above the folder's root: not a file of it.
//! assert_eq!(hero.in_folder(Path::new("")), None);
//!
//! assert_eq!(Reference::parse("https://cdn.example/a.png"), None);
//! assert_eq!(Reference::parse("//cdn.example/a.png"), None);
//! assert_eq!(Reference::parse("data:image/png;base64,xyz"), None);
//! ```

use std::path::{Path, PathBuf};

/// A URL written in a page, reduced to the path it names on the same site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// Written from the site's root (`/img/a.png`) rather than the page's directory.
    rooted: bool,
    /// How many directories it climbs (`..`) before its own segments, from the page's directory
    /// or, rooted, from the root (where a browser stays and a folder has nothing above).
    up: usize,
    /// Its segments after the climb, decoded.
    segments: Vec<String>,
}

impl Reference {
    /// Reads `url` as a browser would; `None` for what is not a file of the same site: an empty
    /// reference, `//host`, and any scheme (`https:`, `data:`, `mailto:`...).
    #[must_use]
    pub fn parse(url: &str) -> Option<Reference> {
        let url = url.trim();
        let url = url.split(['#', '?']).next().unwrap_or_default();
        if url.is_empty() || url.starts_with("//") || has_scheme(url) {
            return None;
        }
        let decoded = percent_decode(url);
        let rooted = decoded.starts_with('/');
        let mut up = 0;
        let mut segments: Vec<String> = Vec::new();
        for part in decoded.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    if segments.pop().is_none() {
                        up += 1;
                    }
                }
                part => segments.push(part.to_owned()),
            }
        }
        Some(Reference {
            rooted,
            up,
            segments,
        })
    }

    /// The URL path it names on a page in URL directory `dir` (decoded, as `/blog/`): always
    /// absolute, and like a browser, a `..` above the root stays at the root.
    #[must_use]
    pub fn in_url_dir(&self, dir: &str) -> String {
        let mut path: Vec<&str> = Vec::new();
        if !self.rooted {
            for part in dir.split('/') {
                match part {
                    "" | "." => {}
                    ".." => {
                        path.pop();
                    }
                    part => path.push(part),
                }
            }
        }
        path.truncate(path.len().saturating_sub(self.up));
        path.extend(self.segments.iter().map(String::as_str));
        format!("/{}", path.join("/"))
    }

    /// The file it names, relative to a folder served as the site's root, from a page in the
    /// folder's directory `dir` (relative to the folder); `None` when it climbs above the folder.
    #[must_use]
    pub fn in_folder(&self, dir: &Path) -> Option<PathBuf> {
        let mut path = if self.rooted {
            PathBuf::new()
        } else {
            dir.to_path_buf()
        };
        for _ in 0..self.up {
            if !path.pop() {
                return None;
            }
        }
        path.extend(&self.segments);
        Some(path)
    }
}

/// Whether `url` starts with a scheme (`https:`, `data:`, `a+b-c.d:`): a letter, then letters,
/// digits, `+`, `-` or `.`, then a colon.
#[must_use]
pub fn has_scheme(url: &str) -> bool {
    url.split_once(':').is_some_and(|(scheme, _)| {
        scheme
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    })
}

/// `%20` and friends decoded; invalid escapes stay as written, invalid UTF-8 becomes U+FFFD.
#[must_use]
pub fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(dir: &str, url: &str) -> Option<Option<PathBuf>> {
        Reference::parse(url).map(|r| r.in_folder(Path::new(dir)))
    }

    fn url_dir(dir: &str, url: &str) -> Option<String> {
        Reference::parse(url).map(|r| r.in_url_dir(dir))
    }

    #[test]
    fn references_resolve_in_a_folder_like_a_browser() {
        let local = |p: &str| Some(Some(PathBuf::from(p)));
        assert_eq!(folder("blog", "img/a.png"), local("blog/img/a.png"));
        assert_eq!(folder("blog", "/img/a.png?v=3#x"), local("img/a.png"));
        assert_eq!(folder("blog", "./a%20b.png"), local("blog/a b.png"));
        assert_eq!(folder("blog", "../a.png"), local("a.png"));
        assert_eq!(folder("blog", "a/../../b.png"), local("b.png"));
        assert_eq!(folder("blog", "../../a.png"), Some(None));
        assert_eq!(folder("", "a/../../b.png"), Some(None));
        assert_eq!(folder("blog", "%2Fimg/a.png"), local("img/a.png"));
        assert_eq!(folder("blog", "/../a.png"), Some(None));
        assert_eq!(folder("blog", "https://cdn.example/a.png"), None);
        assert_eq!(folder("blog", "//cdn.example/a.png"), None);
        assert_eq!(folder("blog", "data:image/png;base64,xyz"), None);
        assert_eq!(folder("blog", "  "), None);
        assert_eq!(folder("blog", "a:b.png"), None);
        assert_eq!(folder("blog", "%zz.png"), local("blog/%zz.png"));
    }

    #[test]
    fn references_resolve_against_a_request_path() {
        assert_eq!(
            url_dir("/blog/", "img/a.png").as_deref(),
            Some("/blog/img/a.png")
        );
        assert_eq!(
            url_dir("/blog/", "../img/a.png?v=2").as_deref(),
            Some("/img/a.png")
        );
        assert_eq!(
            url_dir("/blog/", "/img/a%20b.png").as_deref(),
            Some("/img/a b.png")
        );
        assert_eq!(url_dir("/", "../../a.png").as_deref(), Some("/a.png"));
        assert_eq!(url_dir("/blog/", "/../a.png").as_deref(), Some("/a.png"));
        assert_eq!(url_dir("/a/../b/", "c.png").as_deref(), Some("/b/c.png"));
        assert_eq!(
            url_dir("/a/b/", "../../../c.png").as_deref(),
            Some("/c.png")
        );
        assert_eq!(url_dir("/", "https://cdn.example/a.png"), None);
        assert_eq!(url_dir("/", "//cdn.example/a.png"), None);
        assert_eq!(url_dir("/", "data:image/png;base64,xyz"), None);
    }

    #[test]
    fn schemes_are_what_rfc_3986_allows() {
        assert!(has_scheme("https://a"));
        assert!(has_scheme("data:x"));
        assert!(has_scheme("a+b-c.d:x"));
        assert!(!has_scheme("1a:x"));
        assert!(!has_scheme("img/a.png"));
        assert!(!has_scheme("a b:x"));
        assert!(!has_scheme(":x"));
    }
}
