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
