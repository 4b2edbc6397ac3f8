//! Sources and locations: where a node came from, so a diagnostic can point at it.
//!
//! A [`Loc`] is either a byte range in a file held by a [`Sources`] map, or an opaque
//! [`Loc::External`] token that another front end (the attribute macros) maps back to its own
//! spans. Nothing in this crate assumes that every node came from a file.
//!
//! A [`SourceFile`] is indexed when it is added (its line starts, and character counts every
//! few hundred bytes), so finding the line and column of a position costs the same in a file
//! of one line or of a million. [`read_file`] is how files come in from disk: regular files
//! only, and no more than a limit.

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::{Arc, OnceLock};

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

/// One source file: its name (usually a path) and its text, indexed so that a position is found
/// in time independent of the file's size (a report of thousands of diagnostics stays linear).
#[derive(Debug, Clone)]
pub struct SourceFile {
    name: String,
    text: Arc<str>,
    /// Offset of the first byte of each line (after each `\n`).
    line_starts: Vec<usize>,
    /// Characters before each [`CHARS_EVERY`]-byte block, so a column is counted in a block at
    /// most, not from the start of a (possibly megabyte-long) line.
    chars_before_block: Vec<usize>,
    /// Whether the text has a `\r`: only then do miette's lines differ from `line_starts`.
    has_carriage_return: bool,
    /// Line starts as miette counts lines (a lone `\r` ends one too), for the renderer, when
    /// they differ from `line_starts`; computed on first use.
    report_line_starts: OnceLock<Vec<usize>>,
}

/// Bytes per block of [`SourceFile`]'s character index.
const CHARS_EVERY: usize = 256;

impl SourceFile {
    fn new(name: String, text: Arc<str>) -> Self {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        let mut chars_before_block = Vec::with_capacity(text.len() / CHARS_EVERY + 2);
        let mut chars = 0;
        for block in text.as_bytes().chunks(CHARS_EVERY) {
            chars_before_block.push(chars);
            chars += count_chars(block);
        }
        // The end, for a text whose length is a whole number of blocks.
        chars_before_block.push(chars);
        SourceFile {
            has_carriage_return: text.contains('\r'),
            name,
            text,
            line_starts,
            chars_before_block,
            report_line_starts: OnceLock::new(),
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
        let line = self.line_index(offset);
        let start = self.line_starts.get(line).copied().unwrap_or(0);
        let column = if self.text.is_char_boundary(offset) {
            self.chars_before(offset) - self.chars_before(start)
        } else {
            offset - start
        };
        (line + 1, column + 1)
    }

    /// The 0-based line `offset` is on.
    fn line_index(&self, offset: usize) -> usize {
        self.line_starts
            .partition_point(|&start| start <= offset)
            .saturating_sub(1)
    }

    /// How many characters start before byte `offset` (a character boundary).
    fn chars_before(&self, offset: usize) -> usize {
        let block = offset / CHARS_EVERY;
        let counted = self.chars_before_block.get(block).copied().unwrap_or(0);
        let rest = self
            .text
            .as_bytes()
            .get(block * CHARS_EVERY..offset)
            .unwrap_or_default();
        counted + count_chars(rest)
    }

    /// The offset of the first byte of each line, counting lines as miette's renderer does:
    /// `\n`, `\r\n` and a lone `\r` each end one.
    pub(crate) fn report_line_starts(&self) -> &[usize] {
        if !self.has_carriage_return {
            return &self.line_starts;
        }
        self.report_line_starts.get_or_init(|| {
            let bytes = self.text.as_bytes();
            let mut starts = vec![0];
            for (i, &byte) in bytes.iter().enumerate() {
                let ends_line =
                    byte == b'\n' || (byte == b'\r' && bytes.get(i + 1) != Some(&b'\n'));
                if ends_line {
                    starts.push(i + 1);
                }
            }
            starts
        })
    }
}

/// Characters in `bytes`, a run of UTF-8 that may start or end inside a character: the bytes that
/// are not continuation bytes.
fn count_chars(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&byte| byte & 0xC0 != 0x80).count()
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

/// What [`read_file`] read: the file's bytes, at most `limit + 1` of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadFile {
    /// The bytes read: the whole file, or `limit + 1` bytes of a larger one.
    pub bytes: Vec<u8>,
    /// The file's size: as the file system gave it, or what was read if that was more (a file
    /// that grew while it was read).
    pub len: u64,
}

impl ReadFile {
    /// Whether the file was larger than the limit it was read with.
    #[must_use]
    pub fn exceeds(&self, limit: usize) -> bool {
        self.bytes.len() > limit
    }
}

/// Reads a source file, refusing what is not a regular file and reading at most `limit + 1`
/// bytes.
///
/// A named pipe would block until something writes to it, and a device such as `/dev/zero`
/// never ends: both are refused before they are opened, with an
/// [`io::ErrorKind::InvalidInput`] error saying what the path is instead (checked again on the
/// opened file, in case it was replaced in between). The read stops one byte past `limit`, so
/// a file that grows while it is read cannot use more memory than that; the caller tells an
/// oversized file by [`ReadFile::exceeds`].
///
/// ```
/// use velocity_policy_lang::source::read_file;
///
/// let error = read_file(std::path::Path::new("/dev/null"), 1024).unwrap_err();
/// assert_eq!(error.to_string(), "not a regular file but a character device");
/// ```
pub fn read_file(path: &Path, limit: usize) -> io::Result<ReadFile> {
    use std::io::Read as _;

    regular(&std::fs::metadata(path)?)?;
    let file = std::fs::File::open(path)?;
    let metadata = file.metadata()?;
    regular(&metadata)?;
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    let mut bytes = Vec::with_capacity(usize::try_from(metadata.len().min(cap)).unwrap_or(0));
    file.take(cap).read_to_end(&mut bytes)?;
    let read = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    Ok(ReadFile {
        bytes,
        len: metadata.len().max(read),
    })
}

/// `Ok` for a regular file; otherwise an error naming what the path is instead.
fn regular(metadata: &std::fs::Metadata) -> io::Result<()> {
    let file_type = metadata.file_type();
    if file_type.is_file() {
        return Ok(());
    }
    let what = if file_type.is_dir() {
        "a directory"
    } else {
        special_file(&file_type)
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("not a regular file but {what}"),
    ))
}

#[cfg(unix)]
fn special_file(file_type: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    if file_type.is_fifo() {
        "a named pipe (FIFO)"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

#[cfg(not(unix))]
fn special_file(_: &std::fs::FileType) -> &'static str {
    "a special file"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_count_characters_on_lines_of_any_length() {
        // Multi-byte characters before the offset, across many index blocks, on one line.
        let text = format!("a\n{}x", "é".repeat(1000));
        let mut sources = Sources::new();
        let id = sources.add("x", text.as_str());
        let file = sources.get(id).unwrap();
        assert_eq!(file.line_col(text.len() - 1), (2, 1001));
        assert_eq!(file.line_col(text.len()), (2, 1002));
        assert_eq!(file.line_col(0), (1, 1));
        assert_eq!(file.line_col(2), (2, 1));
        // Inside a character: bytes, as before.
        assert_eq!(file.line_col(3), (2, 2));
    }

    #[test]
    fn a_text_of_whole_blocks_has_its_end_indexed() {
        let text = "x".repeat(CHARS_EVERY * 2);
        let mut sources = Sources::new();
        let id = sources.add("x", text.as_str());
        assert_eq!(
            sources.get(id).unwrap().line_col(text.len()),
            (1, text.len() + 1)
        );
    }

    #[test]
    fn report_lines_end_at_a_lone_carriage_return_too() {
        let mut sources = Sources::new();
        let id = sources.add("x", "a\rb\r\nc\nd");
        assert_eq!(sources.get(id).unwrap().report_line_starts(), [0, 2, 5, 7]);
        let id = sources.add("y", "a\nb");
        assert_eq!(sources.get(id).unwrap().report_line_starts(), [0, 2]);
    }
}
