//! Sources and locations: where a node came from, so a diagnostic can point at it.
//!
//! A [`Loc`] is either a byte range in a file held by a [`Sources`] map, or an opaque
//! [`Loc::External`] token that another front end (the attribute macros) maps back to its own
//! spans. Nothing in this crate assumes that every node came from a file.

use std::fmt;
use std::sync::Arc;

/// Identifies one source file inside a [`Sources`] map.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct SourceId(u32);

impl SourceId {
    /// The index of this source in its [`Sources`] map.
    #[must_use]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Where a node of the model came from.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum Loc {
    /// A byte range `start..end` in a file of a [`Sources`] map.
    Source {
        /// The file.
        source: SourceId,
        /// First byte of the range.
        start: u32,
        /// One past the last byte of the range.
        end: u32,
    },
    /// An opaque token chosen by another front end (the attribute macros use it as an index
    /// into the spans of the attribute being expanded).
    External(u32),
}

impl Loc {
    /// A location covering `start..end` in `source`.
    #[must_use]
    pub fn span(source: SourceId, start: usize, end: usize) -> Self {
        Loc::Source {
            source,
            start: clamp_u32(start),
            end: clamp_u32(end.max(start)),
        }
    }

    /// The file this location is in, if it is in a file.
    #[must_use]
    pub fn source(&self) -> Option<SourceId> {
        match self {
            Loc::Source { source, .. } => Some(*source),
            Loc::External(_) => None,
        }
    }

    /// The byte range of this location, if it is in a file.
    #[must_use]
    pub fn range(&self) -> Option<std::ops::Range<usize>> {
        match self {
            Loc::Source { start, end, .. } => Some(*start as usize..*end as usize),
            Loc::External(_) => None,
        }
    }

    /// The smallest location covering both `self` and `other`, when both are in the same file;
    /// otherwise `self`.
    #[must_use]
    pub fn to(self, other: Loc) -> Loc {
        match (self, other) {
            (
                Loc::Source { source, start, end },
                Loc::Source {
                    source: other_source,
                    start: other_start,
                    end: other_end,
                },
            ) if source == other_source => Loc::Source {
                source,
                start: start.min(other_start),
                end: end.max(other_end),
            },
            _ => self,
        }
    }

    /// A key that orders locations by file, then position; external locations last.
    pub(crate) fn sort_key(&self) -> (u32, u32, u32) {
        match self {
            Loc::Source { source, start, end } => (source.0, *start, *end),
            Loc::External(token) => (u32::MAX, *token, 0),
        }
    }
}

impl fmt::Debug for Loc {
    // Compact on purpose: a `Spec` printed with `{:?}` stays readable.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Loc::Source { source, start, end } => write!(f, "@{}:{}..{}", source.0, start, end),
            Loc::External(token) => write!(f, "@external:{token}"),
        }
    }
}

fn clamp_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// One source file: its name (usually a path) and its text.
#[derive(Debug, Clone)]
pub struct SourceFile {
    name: String,
    text: Arc<str>,
    line_starts: Vec<usize>,
}

impl SourceFile {
    fn new(name: String, text: Arc<str>) -> Self {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        SourceFile {
            name,
            text,
            line_starts,
        }
    }

    /// The name the file was added under (usually its path).
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The file's text.
    #[must_use]
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The shared text, for handing to a renderer without copying.
    #[must_use]
    pub fn shared_text(&self) -> Arc<str> {
        Arc::clone(&self.text)
    }

    /// The 1-based line and column (in characters) of byte `offset`.
    #[must_use]
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = match self.line_starts.binary_search(&offset) {
            Ok(line) => line,
            Err(next) => next.saturating_sub(1),
        };
        let start = self.line_starts.get(line).copied().unwrap_or(0);
        let column = self
            .text
            .get(start..offset)
            .map_or(offset - start, |prefix| prefix.chars().count());
        (line + 1, column + 1)
    }
}

/// The source files a [`Loc`] may point into.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    files: Vec<SourceFile>,
}

impl Sources {
    /// An empty map.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a file and returns its id.
    pub fn add(&mut self, name: impl Into<String>, text: impl Into<Arc<str>>) -> SourceId {
        let id = SourceId(u32::try_from(self.files.len()).unwrap_or(u32::MAX));
        self.files.push(SourceFile::new(name.into(), text.into()));
        id
    }

    /// The file with this id.
    #[must_use]
    pub fn get(&self, id: SourceId) -> Option<&SourceFile> {
        self.files.get(id.index())
    }

    /// All files, in the order they were added.
    pub fn iter(&self) -> impl Iterator<Item = (SourceId, &SourceFile)> {
        (0u32..)
            .zip(self.files.iter())
            .map(|(i, file)| (SourceId(i), file))
    }

    /// `(file name, line, column)` of the start of `loc`, when it is in a file.
    #[must_use]
    pub fn position(&self, loc: Loc) -> Option<Position<'_>> {
        let (source, range) = (loc.source()?, loc.range()?);
        let file = self.get(source)?;
        let (line, column) = file.line_col(range.start);
        let (end_line, end_column) = file.line_col(range.end);
        Some(Position {
            file: file.name(),
            line,
            column,
            end_line,
            end_column,
        })
    }

    /// The text `loc` covers, when it is in a file.
    #[must_use]
    pub fn snippet(&self, loc: Loc) -> Option<&str> {
        self.get(loc.source()?)?.text().get(loc.range()?)
    }
}

/// A human position: file name, 1-based line and column of the start and the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position<'a> {
    /// The file's name.
    pub file: &'a str,
    /// Line of the first character (1-based).
    pub line: usize,
    /// Column of the first character, counted in characters (1-based).
    pub column: usize,
    /// Line just after the last character (1-based).
    pub end_line: usize,
    /// Column just after the last character (1-based).
    pub end_column: usize,
}

impl fmt::Display for Position<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// A value and the location it was written at.
#[derive(Clone, PartialEq)]
pub struct Located<T> {
    /// The value.
    pub value: T,
    /// Where it was written.
    pub loc: Loc,
}

impl<T> Located<T> {
    /// Pairs a value with its location.
    pub fn new(value: T, loc: Loc) -> Self {
        Located { value, loc }
    }
}

impl<T: fmt::Debug> fmt::Debug for Located<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} {:?}", self.value, self.loc)
    }
}
