//! Reading a budget from an incoming request's headers.

use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::deadline::parse_grpc_timeout;

/// The gRPC deadline header: 1 to 8 digits and a unit (`H`, `M`, `S`, `m`, `u`, `n`).
pub const GRPC_TIMEOUT_HEADER: &str = "grpc-timeout";

/// The plain deadline header for HTTP callers: the budget left in whole milliseconds, 1 to 8
/// digits (`x-deadline-ms: 300`).
pub const DEADLINE_MS_HEADER: &str = "x-deadline-ms";

/// Parses a millisecond header value: 1 to 8 ASCII digits, surrounding spaces allowed.
///
/// ```
/// use std::time::Duration;
/// use velocity_policy_runtime::layer::deadline::parse_ms_header;
///
/// assert_eq!(parse_ms_header("300"), Some(Duration::from_millis(300)));
/// assert_eq!(parse_ms_header("-1"), None);
/// assert_eq!(parse_ms_header("123456789"), None);
/// assert_eq!(parse_ms_header(""), None);
/// ```
pub fn parse_ms_header(value: &str) -> Option<Duration> {
    let digits = value.trim();
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().map(Duration::from_millis)
}

/// [`GRPC_TIMEOUT_HEADER`] as a [`HeaderName`], built once: a lookup by `&str` parses the name
/// on every request.
static GRPC_TIMEOUT: HeaderName = HeaderName::from_static(GRPC_TIMEOUT_HEADER);

/// The smallest budget the caller sent in `headers`, if any header parses. Unparsable values
/// are ignored with a debug event naming the header.
#[inline]
pub(super) fn incoming_budget(
    headers: &HeaderMap,
    grpc_timeout: bool,
    ms_header: Option<&HeaderName>,
) -> Option<Duration> {
    if headers.is_empty() {
        return None;
    }
    let grpc = grpc_timeout
        .then(|| headers.get(&GRPC_TIMEOUT))
        .flatten()
        .and_then(|value| read(GRPC_TIMEOUT_HEADER, value, |v| parse_grpc_timeout(v).ok()));
    let ms = ms_header.and_then(|name| {
        headers
            .get(name)
            .and_then(|value| read(name.as_str(), value, parse_ms_header))
    });
    match (grpc, ms) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn read(
    name: &str,
    value: &HeaderValue,
    parse: impl FnOnce(&str) -> Option<Duration>,
) -> Option<Duration> {
    let parsed = value.to_str().ok().and_then(parse);
    if parsed.is_none() {
        tracing::debug!(
            target: "policy",
            mechanism = "deadline",
            name = "request",
            kind = "deadline_header_ignored",
            reason = "unparsable_header",
            header = name,
            value = ?value,
            "ignored a deadline header that does not parse; the configured budget applies"
        );
    }
    parsed
}
