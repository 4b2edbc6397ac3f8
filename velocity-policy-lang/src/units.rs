//! Units: how the language writes durations, sizes, ratios and counts, read and written.
//!
//! Durations take `ms`, `s`, `m`, `h`; sizes `b`, `kb`, `mb`, `gb` (powers of 1024); ratios
//! are a plain number (`0.25`) or a percentage (`25%`). Reading is strict (a missing or unknown
//! unit is an error, never a guess); writing gives the shortest form that reads back the same.
//! A duration is at most [`MAX_DURATION`] (a million hours): a longer one is an error naming
//! that limit, where it is written.

use std::time::Duration;

use crate::ast::Quantity;
use crate::source::Loc;

/// Why a quantity is not the kind of value a setting wants.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum QuantityError {
    /// The number is negative.
    Negative,
    /// The unit is missing.
    MissingUnit,
    /// The unit is not one this kind of value takes.
    UnknownUnit(String),
    /// A unit was given where a plain number is expected.
    UnexpectedUnit(String),
    /// A fraction where a whole number is expected, or a number too large.
    NotWhole,
    /// A duration longer than [`MAX_DURATION`].
    TooLarge,
}

/// The longest duration the language accepts: a million hours (about 114 years). Longer ones
/// are refused where they are written rather than overflowing the clock arithmetic of the
/// runtime (an instant plus a deadline) when the call is made.
pub const MAX_DURATION: Duration = Duration::from_secs(1_000_000 * 3600);

/// [`MAX_DURATION`] as the language writes it, for messages.
pub const MAX_DURATION_TEXT: &str = "1000000h";

/// Units a duration takes.
pub(crate) const DURATION_UNITS: &[&str] = &["ms", "s", "m", "h"];
/// Units a size takes.
pub(crate) const SIZE_UNITS: &[&str] = &["b", "kb", "mb", "gb"];

impl Quantity {
    fn magnitude(&self) -> f64 {
        self.number.parse::<f64>().unwrap_or(f64::NAN)
    }

    fn is_negative(&self) -> bool {
        self.number.starts_with('-')
    }

    /// The quantity as a duration: `ms`, `s`, `m` or `h`.
    pub(crate) fn as_duration(&self) -> Result<Duration, QuantityError> {
        let unit = self.unit.as_deref().ok_or(QuantityError::MissingUnit)?;
        let scale = match unit {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            other => return Err(QuantityError::UnknownUnit(other.to_owned())),
        };
        if self.is_negative() {
            return Err(QuantityError::Negative);
        }
        let duration = Duration::try_from_secs_f64(self.magnitude() * scale)
            .map_err(|_| QuantityError::TooLarge)?;
        if duration > MAX_DURATION {
            return Err(QuantityError::TooLarge);
        }
        Ok(duration)
    }

    /// The quantity as a size in bytes: `b`, `kb`, `mb` or `gb` (powers of 1024).
    pub(crate) fn as_size(&self) -> Result<u64, QuantityError> {
        let unit = self.unit.as_deref().ok_or(QuantityError::MissingUnit)?;
        let scale: f64 = match unit {
            "b" => 1.0,
            "kb" => 1024.0,
            "mb" => 1024.0 * 1024.0,
            "gb" => 1024.0 * 1024.0 * 1024.0,
            other => return Err(QuantityError::UnknownUnit(other.to_owned())),
        };
        if self.is_negative() {
            return Err(QuantityError::Negative);
        }
        let bytes = (self.magnitude() * scale).round();
        if bytes.is_finite() && bytes <= u64::MAX as f64 {
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "checked finite, non-negative and in range just above"
            )]
            Ok(bytes as u64)
        } else {
            Err(QuantityError::NotWhole)
        }
    }

    /// The quantity as a ratio: a plain number (`0.25`) or a percentage (`25%`).
    pub(crate) fn as_ratio(&self) -> Result<f64, QuantityError> {
        let ratio = match self.unit.as_deref() {
            None => self.magnitude(),
            Some("%") => self.magnitude() / 100.0,
            Some(other) => return Err(QuantityError::UnknownUnit(other.to_owned())),
        };
        if ratio.is_finite() {
            Ok(ratio)
        } else {
            Err(QuantityError::NotWhole)
        }
    }

    /// The quantity as a whole count without a unit.
    pub(crate) fn as_count(&self) -> Result<u32, QuantityError> {
        if let Some(unit) = &self.unit {
            return Err(QuantityError::UnexpectedUnit(unit.clone()));
        }
        if self.is_negative() {
            return Err(QuantityError::Negative);
        }
        self.number
            .parse::<u32>()
            .map_err(|_| QuantityError::NotWhole)
    }
}

/// Formats a size the way the language writes it: `200kb`, `1.5mb`, `512b`.
#[must_use]
pub fn format_size(bytes: u64) -> String {
    const KB: u64 = 1024;
    for (unit, scale) in [("gb", KB * KB * KB), ("mb", KB * KB), ("kb", KB)] {
        if bytes >= scale {
            // Shown to a person, rounded to three decimals: precision past 2^53 does not matter.
            let value = bytes as f64 / scale as f64;
            return format!("{}{unit}", trim_decimal(value));
        }
    }
    format!("{bytes}b")
}

/// Formats a duration the way the language writes it: `3s`, `200ms`, `1.5s`, `2m`.
#[must_use]
pub fn format_duration(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    const MS: u128 = 1_000_000;
    const S: u128 = 1_000 * MS;
    if nanos.is_multiple_of(3600 * S) {
        format!("{}h", nanos / (3600 * S))
    } else if nanos.is_multiple_of(60 * S) {
        format!("{}m", nanos / (60 * S))
    } else if nanos.is_multiple_of(S) {
        format!("{}s", nanos / S)
    } else if nanos >= S {
        format!("{}s", trim_decimal(duration.as_secs_f64()))
    } else if nanos.is_multiple_of(MS) {
        format!("{}ms", nanos / MS)
    } else {
        format!("{}ms", trim_decimal(duration.as_secs_f64() * 1000.0))
    }
}

/// Parses a duration as the language writes it (`3s`, `200ms`, `1.5m`), for front ends that
/// take durations as strings (the attribute macros' `deadline = "3s"`). The error is a
/// message in the diagnostics' style, ready to show.
///
/// ```
/// use std::time::Duration;
/// use velocity_policy_lang::units::parse_duration;
///
/// assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
/// assert_eq!(parse_duration(" 1.5s "), Ok(Duration::from_millis(1500)));
/// assert!(parse_duration("3 seconds").is_err());
/// assert!(parse_duration("-1s").is_err());
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let unit = unit.trim();
    let malformed = || {
        format!(
            "`{text}` is not a duration: write a number and one of the units {}, as in `250ms` or `3s`",
            DURATION_UNITS
                .iter()
                .map(|u| format!("`{u}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    if number.is_empty() || number.parse::<f64>().is_err() {
        return Err(malformed());
    }
    let quantity = Quantity {
        number: number.to_owned(),
        unit: (!unit.is_empty()).then(|| unit.to_owned()),
        loc: Loc::External(0),
    };
    quantity.as_duration().map_err(|error| match error {
        QuantityError::Negative => {
            format!("`{text}` is negative: a duration is zero or more")
        }
        QuantityError::TooLarge => format!(
            "`{text}` is too large: the longest duration accepted is `{MAX_DURATION_TEXT}` (about 114 years)"
        ),
        _ => malformed(),
    })
}

/// Formats a ratio as the shortest decimal: `0.5`, `0.25`.
#[must_use]
pub fn format_ratio(ratio: f64) -> String {
    trim_decimal(ratio)
}

fn trim_decimal(value: f64) -> String {
    let text = format!("{value:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quantity(number: &str, unit: Option<&str>) -> Quantity {
        Quantity {
            number: number.to_owned(),
            unit: unit.map(str::to_owned),
            loc: Loc::External(0),
        }
    }

    #[test]
    fn units_convert() {
        assert_eq!(
            quantity("1.5", Some("s")).as_duration(),
            Ok(Duration::from_millis(1500))
        );
        assert_eq!(
            quantity("2", Some("m")).as_duration(),
            Ok(Duration::from_secs(120))
        );
        assert_eq!(quantity("10", Some("kb")).as_size(), Ok(10 * 1024));
        assert_eq!(
            quantity("1.5", Some("mb")).as_size(),
            Ok(1024 * 1024 * 3 / 2)
        );
        assert_eq!(quantity("25", Some("%")).as_ratio(), Ok(0.25));
        assert_eq!(quantity("0.25", None).as_ratio(), Ok(0.25));
        assert_eq!(quantity("7", None).as_count(), Ok(7));
    }

    #[test]
    fn wrong_units_are_errors_not_guesses() {
        assert_eq!(
            quantity("3", None).as_duration(),
            Err(QuantityError::MissingUnit)
        );
        assert_eq!(
            quantity("3", Some("sec")).as_duration(),
            Err(QuantityError::UnknownUnit("sec".to_owned()))
        );
        assert_eq!(
            quantity("-3", Some("s")).as_duration(),
            Err(QuantityError::Negative)
        );
        assert_eq!(
            quantity("3", Some("s")).as_count(),
            Err(QuantityError::UnexpectedUnit("s".to_owned()))
        );
        assert_eq!(
            quantity("2.5", None).as_count(),
            Err(QuantityError::NotWhole)
        );
        assert_eq!(
            quantity("99999999999999999999", None).as_count(),
            Err(QuantityError::NotWhole)
        );
        assert_eq!(
            quantity("1", Some("tb")).as_size(),
            Err(QuantityError::UnknownUnit("tb".to_owned()))
        );
    }

    #[test]
    fn too_long_a_duration_says_so_and_names_the_longest() {
        assert_eq!(
            quantity("99999999999999999999", Some("h")).as_duration(),
            Err(QuantityError::TooLarge)
        );
        assert_eq!(
            quantity("1000001", Some("h")).as_duration(),
            Err(QuantityError::TooLarge)
        );
        assert_eq!(
            quantity(MAX_DURATION_TEXT.trim_end_matches('h'), Some("h")).as_duration(),
            Ok(MAX_DURATION)
        );
        let message = parse_duration("99999999999999999999h").unwrap_err();
        assert_eq!(
            message,
            "`99999999999999999999h` is too large: the longest duration accepted is `1000000h` (about 114 years)"
        );
    }

    #[test]
    fn durations_format_as_written() {
        for (duration, text) in [
            (Duration::from_secs(3), "3s"),
            (Duration::from_millis(200), "200ms"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_secs(120), "2m"),
            (Duration::from_secs(7200), "2h"),
            (Duration::from_micros(500), "0.5ms"),
            (Duration::ZERO, "0s"),
        ] {
            assert_eq!(format_duration(duration), text);
        }
    }
}
