//! The ratchet: a ceiling moves down toward `measured × (1 + headroom)` when the measurement
//! allows it, never up, and the file is rewritten only where its numbers change.
//!
//! The new ceiling is rounded up in the unit it was written in (one decimal for `kb` and
//! `mb`, two for `gb`, whole bytes and whole counts), so it never falls below
//! `measured × (1 + headroom)`; a ratchet that changes nothing leaves the file as it is, so
//! running it again with the same measurements is a no-op.

use std::ops::Range;

use velocity_policy_lang::Ceiling;

/// Bytes per unit, and the decimals a rewritten number keeps.
fn scale(unit: Option<&str>) -> (f64, i32) {
    match unit {
        Some("kb") => (1024.0, 1),
        Some("mb") => (1024.0 * 1024.0, 1),
        Some("gb") => (1024.0 * 1024.0 * 1024.0, 2),
        _ => (1.0, 0),
    }
}

#[derive(Debug, Clone, Copy)]
enum Round {
    Up,
    Nearest,
}

/// `value` (bytes or a count) written in `unit` as the language writes it (`80.1kb`, `171`),
/// and the value that text stands for.
fn written(value: f64, unit: Option<&str>, round: Round) -> (String, u64) {
    let (scale, decimals) = scale(unit);
    let factor = 10f64.powi(decimals);
    let scaled = value / scale * factor;
    // A hair below a whole step is the step itself: float noise must not add a step.
    let steps = match round {
        Round::Up => (scaled - 1e-6).ceil(),
        Round::Nearest => scaled.round(),
    }
    .max(0.0);
    let number = steps / factor;
    let mut text = format!(
        "{number:.prec$}",
        prec = usize::try_from(decimals).unwrap_or(0)
    );
    if text.contains('.') {
        text = text.trim_end_matches('0').trim_end_matches('.').to_owned();
    }
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "non-negative and far below u64::MAX for any real size"
    )]
    let stands_for = (number * scale).round() as u64;
    (format!("{text}{}", unit.unwrap_or("")), stands_for)
}

/// A lowered ceiling: the new text of its `at most` and of its measurement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lowered {
    /// The new ceiling, as written.
    pub(crate) ceiling: String,
    /// What the new ceiling stands for, in bytes or crates.
    pub(crate) ceiling_value: u64,
    /// The new measurement, as written.
    pub(crate) measured: String,
}

/// The lowered line, if `measured` leaves the ceiling more room than its headroom.
pub(crate) fn ratchet(line: &Ceiling, measured: u64) -> Option<Lowered> {
    #[expect(
        clippy::cast_precision_loss,
        reason = "sizes below 2^53 bytes are exact"
    )]
    let target = measured as f64 * (1.0 + line.headroom.value);
    let unit = line.at_most.value.unit.as_deref();
    let (ceiling, ceiling_value) = written(target, unit, Round::Up);
    if ceiling_value >= line.at_most.value.value {
        return None;
    }
    #[expect(
        clippy::cast_precision_loss,
        reason = "sizes below 2^53 bytes are exact"
    )]
    let (measured, _) = written(
        measured as f64,
        line.measured.value.unit.as_deref(),
        Round::Nearest,
    );
    Some(Lowered {
        ceiling,
        ceiling_value,
        measured,
    })
}

/// `text` with each range replaced; ranges must not overlap.
pub(crate) fn rewrite(text: &str, mut edits: Vec<(Range<usize>, String)>) -> String {
    edits.sort_by_key(|(range, _)| std::cmp::Reverse(range.start));
    let mut out = text.to_owned();
    for (range, replacement) in edits {
        if out.is_char_boundary(range.start) && out.is_char_boundary(range.end) {
            out.replace_range(range, &replacement);
        }
    }
    out
}

/// `bytes` in `unit` for a table: `77.7 kb`, `8.1 mb`, `171`.
pub(crate) fn shown(value: u64, unit: Option<&str>) -> String {
    let (scale, _) = scale(unit);
    match unit {
        None => value.to_string(),
        Some("b") => format!("{value} b"),
        #[expect(
            clippy::cast_precision_loss,
            reason = "sizes below 2^53 bytes are exact"
        )]
        Some(unit) => format!("{:.1} {unit}", value as f64 / scale),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_rounds_in_the_unit_as_written() {
        assert_eq!(written(82.0 * 1024.0, Some("kb"), Round::Up).0, "82kb");
        assert_eq!(written(82.01 * 1024.0, Some("kb"), Round::Up).0, "82.1kb");
        assert_eq!(
            written(77.66 * 1024.0, Some("kb"), Round::Nearest).0,
            "77.7kb"
        );
        assert_eq!(
            written(171.0 * 1.03, None, Round::Up),
            ("177".to_owned(), 177)
        );
        assert_eq!(written(1000.4, Some("b"), Round::Up).0, "1001b");
        assert_eq!(
            written(1.234 * 1024.0 * 1024.0 * 1024.0, Some("gb"), Round::Up).0,
            "1.24gb"
        );
    }

    #[test]
    fn rewrite_replaces_only_the_ranges() {
        let text = "a 82kb b 77.7kb // keep 82kb\n";
        assert_eq!(
            rewrite(
                text,
                vec![(2..6, "80.1kb".to_owned()), (9..15, "76.2kb".to_owned())]
            ),
            "a 80.1kb b 76.2kb // keep 82kb\n"
        );
    }
}
