//! How durations are written in JSON: the registry's [`Snapshot`](crate::Snapshot), a refusal's
//! reason, a drill's settings. A leaf that every module may name.

use std::time::Duration;

/// Serialises a duration as milliseconds, a number (fractional below a millisecond): how every
/// duration in a [`Snapshot`](crate::Snapshot) and a refusal's reason is written, under a
/// field name ending in `_ms`.
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
