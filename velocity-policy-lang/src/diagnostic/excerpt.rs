//! The part of a file a report draws, found through the file's line index and cut to size.
//!
//! miette's sources (`str`, `NamedSource`) find a snippet by scanning the text from its first
//! byte, several times per report: a file with thousands of diagnostics took time quadratic in
//! its size to render. miette also pads with format widths, which Rust limits to 65,535, so a
//! label further right than that on one line panicked. An [`Excerpt`] holds only the lines a
//! report draws, each cut to a bounded width, and answers miette exactly as the whole text
//! would for those lines (same line numbers, columns, and the same decision whether two labels
//! share one snippet), so reports of ordinary files are unchanged.

use std::ops::Range;

use miette::{MietteError, MietteSpanContents, SourceCode, SourceSpan, SpanContents};

use crate::source::SourceFile;

/// Lines of context kept around each label: the snippet is the same as from the whole file for
/// a handler that asks for up to `CONTEXT - 1` (ours ask for miette's default, 1).
const CONTEXT: usize = 3;

/// Labels whose lines are further apart than this are drawn as separate snippets (miette would
/// otherwise draw every line between them, sometimes thousands).
const GAP: usize = 32;

/// A label over more lines than this is cut to its first ones.
const LABEL_LINES: usize = 16;

/// Lines longer than this, in bytes, are cut to windows around the labels on them.
pub const LONG_LINE: usize = 256;

/// Bytes kept on each side of a label's start and of its end on a cut line.
const WINDOW: usize = 48;

/// What stands for the text left out of a cut line.
const ELLIPSIS: &str = "…";

/// The lines of one file a report draws, as a [`miette::SourceCode`]: the lines of each label,
/// with a few lines of context around them; labels far apart as separate snippets; a label over many
/// lines cut to its first ones; and lines longer than [`LONG_LINE`] bytes cut to windows around
/// the labels on them, the cuts marked `…`.
///
/// Build one with [`Excerpt::new`], which also says where each label's range is in it: the
/// labels handed to miette must use those ranges. Building and rendering cost the size of the
/// snippet, not of the file; the header's `file:line:column` is the label's place in the file,
/// cut or not.
#[derive(Debug, Clone)]
pub struct Excerpt {
    name: String,
    segments: Vec<Segment>,
}

/// Consecutive lines of the file, copied (long ones cut).
#[derive(Debug, Clone)]
struct Segment {
    /// Offset of the segment's first byte in the excerpt.
    base: usize,
    /// The 0-based line the segment starts at, counted as miette counts lines.
    first_line: usize,
    text: String,
    /// The copied runs of the cut lines, in order.
    pieces: Vec<Piece>,
}

/// A run of a cut line, copied as it is.
#[derive(Debug, Clone, Copy)]
struct Piece {
    /// Its offset in the excerpt.
    at: usize,
    len: usize,
    /// Its offset in the file.
    from: usize,
    /// The byte column its first byte has in the file (0-based, as miette counts).
    column: usize,
}

/// Where one line of the file went in the excerpt.
#[derive(Debug, Clone)]
struct Placed {
    line: usize,
    /// First byte of the line, in the file and in the excerpt.
    from: usize,
    at: usize,
    /// End of the line's text (before its line break), in the file and in the excerpt.
    from_end: usize,
    at_end: usize,
    /// Its runs in the excerpt's pieces, if it was cut.
    pieces: Range<usize>,
}

impl Excerpt {
    /// The excerpt of `file` that shows `ranges` (byte ranges of the file), and where each range
    /// is in it, in the same order.
    #[must_use]
    pub fn new(file: &SourceFile, ranges: &[Range<usize>]) -> (Excerpt, Vec<Range<usize>>) {
        let lines = Lines::new(file);
        let ranges: Vec<Range<usize>> = ranges.iter().map(|range| lines.clamp(range)).collect();

        // The lines to copy: each label's, with context; close groups merged.
        let mut wanted: Vec<(usize, usize)> = ranges
            .iter()
            .map(|range| {
                let first = lines.line_of(range.start).saturating_sub(CONTEXT);
                let last = (lines.line_of(range.end) + CONTEXT + 1).min(lines.last());
                (first, last)
            })
            .collect();
        wanted.sort_unstable();
        let mut groups: Vec<(usize, usize)> = Vec::new();
        for (first, last) in wanted {
            match groups.last_mut() {
                Some(group) if first <= group.1 + GAP => group.1 = group.1.max(last),
                _ => groups.push((first, last)),
            }
        }

        let mut points: Vec<usize> = ranges.iter().flat_map(|r| [r.start, r.end]).collect();
        points.sort_unstable();
        let mut excerpt = Excerpt {
            name: file.name().to_owned(),
            segments: Vec::with_capacity(groups.len()),
        };
        let mut placed = Vec::new();
        let mut base = 0;
        for (first, last) in groups {
            let mut segment = Segment {
                base,
                first_line: first,
                text: String::new(),
                pieces: Vec::new(),
            };
            for line in first..=last {
                placed.push(segment.push_line(&lines, line, &points));
            }
            base += segment.text.len();
            excerpt.segments.push(segment);
        }

        let map = |offset: usize| {
            let line = lines.line_of(offset);
            let index = placed.partition_point(|p: &Placed| p.line < line);
            let Some(place) = placed.get(index).filter(|p| p.line == line) else {
                return 0;
            };
            if offset > place.from_end {
                return place.at_end + (offset - place.from_end);
            }
            if place.pieces.is_empty() {
                return place.at + (offset - place.from);
            }
            let pieces = excerpt.pieces(place.line, &place.pieces);
            let piece = pieces
                .iter()
                .rev()
                .find(|piece| piece.from <= offset)
                .or(pieces.first());
            piece.map_or(place.at, |piece| {
                piece.at + offset.saturating_sub(piece.from).min(piece.len)
            })
        };
        let mapped = ranges
            .iter()
            .map(|range| {
                let start = map(range.start);
                start..map(range.end).max(start)
            })
            .collect();
        (excerpt, mapped)
    }

    /// The pieces of a placed line (they live in the segment that holds the line).
    fn pieces(&self, line: usize, range: &Range<usize>) -> &[Piece] {
        let index = self
            .segments
            .partition_point(|segment| segment.first_line <= line)
            .saturating_sub(1);
        self.segments
            .get(index)
            .and_then(|segment| segment.pieces.get(range.clone()))
            .unwrap_or_default()
    }

    /// The segment holding all of `span`, if one does.
    fn segment(&self, span: &SourceSpan) -> Option<&Segment> {
        let index = self
            .segments
            .partition_point(|segment| segment.base <= span.offset())
            .checked_sub(1)?;
        let segment = self.segments.get(index)?;
        (span.offset() + span.len() <= segment.base + segment.text.len()).then_some(segment)
    }
}

impl Segment {
    /// Copies one line of the file to the end of the segment, cutting it if it is long.
    fn push_line(&mut self, lines: &Lines<'_>, line: usize, points: &[usize]) -> Placed {
        let text = lines.text;
        let (from, from_end, next) = lines.bounds(line);
        let at = self.base + self.text.len();
        let first_piece = self.pieces.len();
        if from_end - from <= LONG_LINE {
            self.text.push_str(text.get(from..next).unwrap_or_default());
            return Placed {
                line,
                from,
                at,
                from_end,
                at_end: at + (from_end - from),
                pieces: first_piece..first_piece,
            };
        }
        let mut windows: Vec<(usize, usize)> = points
            .iter()
            .filter(|&&point| (from..=from_end).contains(&point))
            .map(|&point| {
                (
                    floor_char(text, point.saturating_sub(WINDOW).max(from)),
                    ceil_char(text, (point + WINDOW).min(from_end)),
                )
            })
            .collect();
        if windows.is_empty() {
            windows.push((from, ceil_char(text, from + 2 * WINDOW)));
        }
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(windows.len());
        for (start, end) in windows {
            match merged.last_mut() {
                // Joined when the cut would save less than its mark takes.
                Some(last) if start <= last.1 + ELLIPSIS.len() => last.1 = last.1.max(end),
                _ => merged.push((start, end)),
            }
        }
        for (i, &(start, end)) in merged.iter().enumerate() {
            if i > 0 || start > from {
                self.text.push_str(ELLIPSIS);
            }
            self.pieces.push(Piece {
                at: self.base + self.text.len(),
                len: end - start,
                from: start,
                column: start - from,
            });
            self.text.push_str(text.get(start..end).unwrap_or_default());
        }
        if merged.last().is_some_and(|&(_, end)| end < from_end) {
            self.text.push_str(ELLIPSIS);
        }
        let at_end = self.base + self.text.len();
        self.text
            .push_str(text.get(from_end..next).unwrap_or_default());
        Placed {
            line,
            from,
            at,
            from_end,
            at_end,
            pieces: first_piece..self.pieces.len(),
        }
    }

    /// The column in the file of excerpt offset `offset`, when it is on a cut line.
    fn file_column(&self, offset: usize) -> Option<usize> {
        let index = self
            .pieces
            .partition_point(|piece| piece.at <= offset)
            .checked_sub(1)?;
        let piece = self.pieces.get(index)?;
        (offset <= piece.at + piece.len).then(|| piece.column + (offset - piece.at))
    }
}

impl SourceCode for Excerpt {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        // A span across two segments is two snippets: miette then draws them apart.
        let segment = self.segment(span).ok_or(MietteError::OutOfBounds)?;
        let local = SourceSpan::new((span.offset() - segment.base).into(), span.len());
        let contents = segment.text.as_bytes().read_span(
            &local,
            context_lines_before.min(CONTEXT - 1),
            context_lines_after.min(CONTEXT - 1),
        )?;
        let column = match context_lines_before {
            0 => segment
                .file_column(span.offset())
                .unwrap_or(contents.column()),
            _ => contents.column(),
        };
        Ok(Box::new(MietteSpanContents::new_named(
            self.name.clone(),
            contents.data(),
            SourceSpan::new(
                (contents.span().offset() + segment.base).into(),
                contents.span().len(),
            ),
            contents.line() + segment.first_line,
            column,
            contents.line_count() + segment.first_line,
        )))
    }
}

/// A file's text and its lines as miette counts them.
struct Lines<'a> {
    text: &'a str,
    starts: &'a [usize],
}

impl<'a> Lines<'a> {
    fn new(file: &'a SourceFile) -> Self {
        Lines {
            text: file.text(),
            starts: file.report_line_starts(),
        }
    }

    fn last(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    fn line_of(&self, offset: usize) -> usize {
        self.starts
            .partition_point(|&start| start <= offset)
            .saturating_sub(1)
    }

    /// Start of `line`, end of its text (before the line break), and start of the next line.
    fn bounds(&self, line: usize) -> (usize, usize, usize) {
        let start = self.starts.get(line).copied().unwrap_or(self.text.len());
        let next = self
            .starts
            .get(line + 1)
            .copied()
            .unwrap_or(self.text.len());
        let bytes = self.text.as_bytes();
        let mut end = next;
        if end > start && bytes.get(end - 1) == Some(&b'\n') {
            end -= 1;
        }
        if end > start && bytes.get(end - 1) == Some(&b'\r') {
            end -= 1;
        }
        (start, end, next)
    }

    /// `range` inside the text, on character boundaries, and cut to its first [`LABEL_LINES`]
    /// lines.
    fn clamp(&self, range: &Range<usize>) -> Range<usize> {
        let len = self.text.len();
        let start = floor_char(self.text, range.start.min(len));
        let end = ceil_char(self.text, range.end.min(len).max(start));
        let first = self.line_of(start);
        if self.line_of(end) >= first + LABEL_LINES {
            let (_, last_end, _) = self.bounds(first + LABEL_LINES - 1);
            return start..last_end.max(start);
        }
        start..end
    }
}

fn floor_char(text: &str, mut offset: usize) -> usize {
    offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

fn ceil_char(text: &str, mut offset: usize) -> usize {
    offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset += 1;
    }
    offset
}

#[cfg(test)]
mod tests {
    use std::fmt;

    use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource};

    use super::*;
    use crate::source::Sources;

    /// A report over any source, with labels at the given ranges.
    #[derive(Debug)]
    struct Report<S> {
        source: S,
        labels: Vec<Range<usize>>,
    }

    impl<S> fmt::Display for Report<S> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("something is wrong")
        }
    }

    impl<S: fmt::Debug> std::error::Error for Report<S> {}

    impl<S: SourceCode + fmt::Debug> miette::Diagnostic for Report<S> {
        fn source_code(&self) -> Option<&dyn SourceCode> {
            Some(&self.source)
        }

        fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
            Some(Box::new(self.labels.iter().enumerate().map(
                |(i, range)| {
                    let span = SourceSpan::new(range.start.into(), range.end - range.start);
                    LabeledSpan::new_with_span(Some(format!("label {i}")), span)
                },
            )))
        }
    }

    fn draw(diagnostic: &dyn miette::Diagnostic) -> String {
        let mut out = String::new();
        GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor())
            .with_width(100)
            .render_report(&mut out, diagnostic)
            .unwrap();
        out
    }

    /// The report drawn from an excerpt.
    fn cut(text: &str, labels: &[Range<usize>]) -> String {
        let mut sources = Sources::new();
        let id = sources.add("x.policy", text);
        let (excerpt, mapped) = Excerpt::new(sources.get(id).unwrap(), labels);
        draw(&Report {
            source: excerpt,
            labels: mapped,
        })
    }

    /// The report drawn from the whole text by miette's own source, and from an excerpt.
    fn both(text: &str, labels: &[Range<usize>]) -> (String, String) {
        let whole = draw(&Report {
            source: NamedSource::new("x.policy", text.to_owned()),
            labels: labels.to_vec(),
        });
        (whole, cut(text, labels))
    }

    fn numbered(lines: usize, ending: &str) -> String {
        (1..=lines)
            .map(|i| format!("breaker b{i} {{ cooldown = {i}s }}{ending}"))
            .collect()
    }

    fn one(range: Range<usize>) -> Vec<Range<usize>> {
        std::iter::once(range).collect()
    }

    fn at(text: &str, needle: &str) -> Range<usize> {
        let start = text.find(needle).unwrap();
        start..start + needle.len()
    }

    #[test]
    fn an_ordinary_file_is_drawn_as_from_the_whole_text() {
        let text = numbered(60, "\n");
        let cases: Vec<Vec<Range<usize>>> = vec![
            vec![at(&text, "b1 ")],
            vec![at(&text, "b60 ")],
            vec![at(&text, "cooldown = 30s")],
            // Close enough for miette to draw one snippet, or two.
            vec![at(&text, "b20 "), at(&text, "b23 ")],
            vec![at(&text, "b3 "), at(&text, "b9 ")],
            vec![at(&text, "b2 "), at(&text, "b40 ")],
            // Over several lines, and empty.
            one(text.find("b5 ").unwrap()..text.find("b8 ").unwrap()),
            one(text.len()..text.len()),
            one(0..0),
        ];
        for labels in cases {
            let (whole, cut) = both(&text, &labels);
            assert_eq!(cut, whole, "labels {labels:?}");
        }
    }

    #[test]
    fn line_endings_are_counted_as_miette_counts_them() {
        for ending in ["\r\n", "\r"] {
            let text = numbered(12, ending);
            let labels = [at(&text, "b7 "), at(&text, "cooldown = 9s")];
            let (whole, cut) = both(&text, &labels);
            assert_eq!(cut, whole, "ending {ending:?}");
        }
        let (whole, cut) = both("", &one(0..0));
        assert_eq!(cut, whole);
    }

    #[test]
    fn labels_far_apart_are_two_snippets() {
        let text = numbered(500, "\n");
        let cut = cut(&text, &[at(&text, "b300 "), at(&text, "b450 ")]);
        assert!(cut.contains("x.policy:300:9"), "{cut}");
        assert!(cut.contains("x.policy:450:9"), "{cut}");
        assert!(
            !cut.contains("b375 "),
            "the lines between are not drawn:\n{cut}"
        );
    }

    #[test]
    fn a_long_line_is_cut_around_its_labels_and_keeps_its_columns() {
        let padding = "a".repeat(200_000);
        let text = format!(
            "request {{ deadline = 10s }}\noperation o: critical {{ fallback = \"{padding}\"; bogus = 1 }}\nnext\n"
        );
        let bogus = at(&text, "bogus");
        let fallback = at(&text, "fallback");
        // (miette's own source panics here: "Formatting argument out of range".)
        let both_labels = cut(&text, &[fallback, bogus.clone()]);
        assert!(both_labels.contains("x.policy:2:25"), "{both_labels}");
        assert!(both_labels.contains("\"; bogus = 1 }"), "{both_labels}");
        assert!(both_labels.contains("aaaa…aaaa"), "{both_labels}");
        assert!(both_labels.lines().all(|line| line.len() < 400));
        assert!(
            both_labels.contains("next"),
            "context is kept:\n{both_labels}"
        );

        let far = cut(&text, &[bogus]);
        let column = text.find("bogus").unwrap() - text.find("operation").unwrap() + 1;
        assert!(column > 200_000);
        assert!(far.contains(&format!("x.policy:2:{column}")), "{far}");
        assert!(far.contains("2 │ …aaaa"), "{far}");
    }

    #[test]
    fn a_label_over_many_lines_is_cut_to_its_first() {
        let text = numbered(100, "\n");
        let cut = cut(&text, &one(0..text.len()));
        assert!(cut.contains("b16 ") && !cut.contains("b30 "), "{cut}");
    }

    #[test]
    fn ranges_outside_the_text_or_inside_a_character_are_clamped() {
        let text = "é\nbreaker\n";
        let cut = cut(text, &[1..2, 5..500]);
        assert!(cut.contains("breaker"), "{cut}");
    }
}
