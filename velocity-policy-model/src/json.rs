//! How durations are written in JSON (feature `serde`): as milliseconds, under a field name
//! ending in `_ms`, as the runtime's snapshots write every duration.

use std::time::Duration;

/// Serialises a duration as milliseconds, a number (fractional below a millisecond).
pub(crate) fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1000.0)
}

/// [`millis`], for a duration that may be absent (`null`).
#[expect(
    clippy::ref_option,
    reason = "the signature serde's `serialize_with` calls"
)]
pub(crate) fn millis_opt<S: serde::Serializer>(
    d: &Option<Duration>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => millis(d, s),
        None => s.serialize_none(),
    }
}

/// A rate that may be absent: `{"limit": 20, "per_ms": 60000}`, or `null`.
#[expect(
    clippy::ref_option,
    reason = "the signature serde's `serialize_with` calls"
)]
pub(crate) fn rate_opt<S: serde::Serializer>(
    rate: &Option<(u32, Duration)>,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeStruct as _;
    match rate {
        Some((limit, per)) => {
            let mut rate = s.serialize_struct("Rate", 2)?;
            rate.serialize_field("limit", limit)?;
            rate.serialize_field("per_ms", &(per.as_secs_f64() * 1000.0))?;
            rate.end()
        }
        None => s.serialize_none(),
    }
}
