//! gRPC's own signals (feature `tonic`): our refusals and expiries as [`tonic::Status`], with
//! the retry pushback gRPC's retry design (A6) defines, and the pushback a client reads back.
//!
//! A function under `#[critical]` or `#[resilient]` may return `Result<Response<T>, Status>`
//! (a tonic service method): `Status` implements `From<ResilienceError>` and
//! `From<DeadlineExceeded>` here, so a refusal or an expiry becomes the status gRPC's status
//! code guidance gives it:
//!
//! | what happened | status | `grpc-retry-pushback-ms` |
//! |---|---|---|
//! | a breaker is open ([`BreakerOpen`](crate::RefusalKind::BreakerOpen)) | `UNAVAILABLE`: "most likely a transient condition, which can be corrected by retrying with a backoff" | how long it stays open |
//! | a rate limit refused ([`RateLimited`](crate::RefusalKind::RateLimited)) | `RESOURCE_EXHAUSTED`: "perhaps a per-user quota" | when the limiter admits again, when it knows |
//! | a bulkhead is full, or its queue timed out ([`BulkheadFull`](crate::RefusalKind::BulkheadFull)) | `RESOURCE_EXHAUSTED`: "server temporarily out of resources" | none: nobody knows when a slot frees |
//! | shed for load ([`Shed`](crate::RefusalKind::Shed), reason `load`) | `UNAVAILABLE` | none |
//! | shed for budget, or less than the minimum budget left ([`InsufficientBudget`](crate::RefusalKind::InsufficientBudget)) | `DEADLINE_EXCEEDED`: retrying with even less time is pointless | none |
//! | an expiry ([`DeadlineExceeded`]) | `DEADLINE_EXCEEDED` | none |
//!
//! The pushback is in whole milliseconds, rounded up, so a client that honours it never comes
//! back sooner than we said. The status message names the refusal's kind and reason code and
//! never the mechanism's name (a breaker's name is the name of a dependency, which callers need
//! not learn); the refusal itself is the status's [source](std::error::Error::source) in this
//! process (never sent), and its tracing event has every field. The [`DeadlineLayer`] answers a
//! gRPC request it refuses or stops waiting for with `DEADLINE_EXCEEDED` itself.
//!
//! On the client side, [`Transient`] for `Status` says what a retry of ours repeats:
//! `UNAVAILABLE`, and `RESOURCE_EXHAUSTED` when the server said how long to wait. Its
//! [`pushback`](Transient::pushback) reads `grpc-retry-pushback-ms`: the retry loop then waits
//! at least that long, or stops when the value is negative or does not parse (A6: "the server
//! asking the client not to retry at all"); a pause that would end past the deadline is never
//! started. A status made here from a refusal of this process is never transient, whatever its
//! code: a refusal is not retried.
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_runtime::{Breaker, ResilienceError};
//! use tonic::{Code, Status};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let breaker = Breaker::builder("inventory").build();
//! breaker.trip(Duration::from_secs(2), "told to back off");
//! let refusal: ResilienceError = breaker.check().unwrap_err();
//!
//! let status = Status::from(refusal);
//! assert_eq!(status.code(), Code::Unavailable);
//! assert_eq!(status.metadata().get("grpc-retry-pushback-ms").unwrap(), "2000");
//! assert!(!status.message().contains("inventory"), "names stay in this process");
//! # }
//! ```
//!
//! [`DeadlineLayer`]: crate::layer::DeadlineLayer

use std::sync::Arc;
use std::time::Duration;

use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Status};

use crate::error::{
    CallError, DeadlineExceeded, RefusalKind, RefusalReason, ResilienceError, ShedReason,
};
use crate::retry::{Pushback, Transient};

/// The header a gRPC server sends a pushback in: whole milliseconds to wait before retrying;
/// negative (or anything that does not parse) asks the client not to retry at all.
pub const RETRY_PUSHBACK_HEADER: &str = "grpc-retry-pushback-ms";

/// The metadata key that carries a refusal's kind (`breaker_open`, `bulkhead_full`...), as the
/// HTTP answers' `x-refusal` header does.
pub const REFUSAL_HEADER: &str = "x-refusal";

/// The longest pushback sent: gRPC implementations read it as a 32-bit count of milliseconds.
const MAX_PUSHBACK_MS: u64 = i32::MAX as u64;

/// The most bytes of a pushback value read: ten digits (with a sign and spaces around them)
/// already exceed any wait a deadline allows.
const MAX_PUSHBACK_LEN: usize = 16;

/// The status code gRPC's guidance gives a refusal: see the [module docs](self).
///
/// ```
/// use velocity_policy_runtime::{Bulkhead, grpc};
/// use tonic::Code;
///
/// let bulkhead = Bulkhead::builder("search").max_concurrent(1).max_queued(0).build();
/// let _held = bulkhead.try_acquire().unwrap();
/// assert_eq!(grpc::code_of(&bulkhead.try_acquire().unwrap_err()), Code::ResourceExhausted);
/// ```
pub fn code_of(refusal: &ResilienceError) -> Code {
    match refusal.reason() {
        RefusalReason::Shed(ShedReason::Budget { .. }) => Code::DeadlineExceeded,
        _ => match refusal.kind() {
            RefusalKind::BreakerOpen | RefusalKind::Shed => Code::Unavailable,
            RefusalKind::BulkheadFull | RefusalKind::RateLimited => Code::ResourceExhausted,
            RefusalKind::InsufficientBudget => Code::DeadlineExceeded,
            // A drill's refusal reads as a dependency's. The kind is in every build, so the arm
            // is too (a `chaos` cfg here broke the build of `tonic` without `chaos`).
            RefusalKind::Injected => Code::Unavailable,
        },
    }
}

/// The pushback a refusal carries: how long the caller should wait, when we know
/// ([`ResilienceError::retry_after`]), in whole milliseconds rounded up.
pub fn pushback_ms(refusal: &ResilienceError) -> Option<u64> {
    refusal.retry_after().map(|wait| {
        let millis = wait.as_nanos().div_ceil(1_000_000);
        u64::try_from(millis)
            .unwrap_or(u64::MAX)
            .min(MAX_PUSHBACK_MS)
    })
}

/// A refusal as gRPC's status for it (see the [module docs](self)): the code, the pushback
/// when the wait is known, the kind in [`REFUSAL_HEADER`], and the refusal as its source.
impl From<ResilienceError> for Status {
    fn from(refusal: ResilienceError) -> Self {
        let code = code_of(&refusal);
        let message = format!(
            "refused: {} ({}); the work never ran",
            refusal.kind(),
            refusal.reason().code()
        );
        let mut metadata = MetadataMap::new();
        metadata.insert(
            REFUSAL_HEADER,
            MetadataValue::from_static(refusal.kind().as_str()),
        );
        if let Some(millis) = pushback_ms(&refusal) {
            metadata.insert(RETRY_PUSHBACK_HEADER, MetadataValue::from(millis));
        }
        let mut status = Status::with_metadata(code, message, metadata);
        status.set_source(Arc::new(refusal));
        status
    }
}

/// An expiry as `DEADLINE_EXCEEDED`, its sentence (the budget, and that the work may have
/// run) as the message and the expiry as its source.
impl From<DeadlineExceeded> for Status {
    fn from(expired: DeadlineExceeded) -> Self {
        let mut status = Status::new(Code::DeadlineExceeded, expired.to_string());
        status.set_source(Arc::new(expired));
        status
    }
}

/// One of the three outcomes as a status: a refusal and an expiry as above, the function's own
/// status as it is.
impl From<CallError<Status>> for Status {
    fn from(error: CallError<Status>) -> Self {
        match error {
            CallError::Refused(refusal) => refusal.into(),
            CallError::DeadlineExceeded(expired) => expired.into(),
            CallError::Failed(status) => status,
        }
    }
}

/// What a retry of ours repeats: `UNAVAILABLE`, and `RESOURCE_EXHAUSTED` with a pushback to
/// wait for; never a status this process made from its own refusal. See the
/// [module docs](self).
impl Transient for Status {
    fn is_transient(&self) -> bool {
        if std::error::Error::source(self).is_some_and(|source| source.is::<ResilienceError>()) {
            // Our own refusal, in this process: the system already decided not to try.
            return false;
        }
        match self.code() {
            Code::Unavailable => true,
            Code::ResourceExhausted => matches!(self.pushback(), Some(Pushback::After(_))),
            _ => false,
        }
    }

    /// `grpc-retry-pushback-ms`, read by [`pushback_of`].
    fn pushback(&self) -> Option<Pushback> {
        pushback_of(self.metadata())
    }
}

/// The server's pushback in `metadata`, if it sent one: `After` a wait of whole milliseconds,
/// or `Never` for a negative value or one that does not parse (A6). A value longer than 16
/// bytes is not read (it is `Never`). What arrives is input: the retry loop still bounds the
/// wait by the deadline, the attempts and the allowance.
///
/// ```
/// use std::time::Duration;
/// use velocity_policy_runtime::grpc::pushback_of;
/// use velocity_policy_runtime::retry::Pushback;
/// use tonic::metadata::MetadataMap;
///
/// let mut metadata = MetadataMap::new();
/// assert_eq!(pushback_of(&metadata), None);
/// metadata.insert("grpc-retry-pushback-ms", "250".parse().unwrap());
/// assert_eq!(pushback_of(&metadata), Some(Pushback::After(Duration::from_millis(250))));
/// metadata.insert("grpc-retry-pushback-ms", "-1".parse().unwrap());
/// assert_eq!(pushback_of(&metadata), Some(Pushback::Never));
/// ```
pub fn pushback_of(metadata: &MetadataMap) -> Option<Pushback> {
    let value = metadata.get(RETRY_PUSHBACK_HEADER)?;
    Some(parse_pushback(value.as_bytes()))
}

/// A pushback value: 1 to 10 digits (spaces around them allowed) are a wait; anything else,
/// a negative number included, asks not to retry.
fn parse_pushback(raw: &[u8]) -> Pushback {
    let digits = if raw.len() <= MAX_PUSHBACK_LEN {
        raw.trim_ascii()
    } else {
        &[]
    };
    let millis = (!digits.is_empty()
        && digits.len() <= 10
        && digits.iter().all(u8::is_ascii_digit))
    .then(|| {
        digits
            .iter()
            .fold(0_u64, |n, d| n * 10 + u64::from(d - b'0'))
    });
    match millis {
        Some(millis) => Pushback::After(Duration::from_millis(millis)),
        None => {
            if digits.first() != Some(&b'-') {
                // A6 reads a negative value as "do not retry" on purpose; anything else that
                // does not parse is a server's mistake, worth a line.
                tracing::debug!(
                    target: "policy",
                    mechanism = "retry",
                    name = "grpc",
                    kind = "pushback_unparsable",
                    reason = "unparsable_header",
                    header = RETRY_PUSHBACK_HEADER,
                    len = raw.len(),
                    "a pushback that does not parse asks not to retry"
                );
            }
            Pushback::Never
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pushback_is_ten_digits_at_most_and_anything_else_asks_not_to_retry() {
        let after = |ms| Pushback::After(Duration::from_millis(ms));
        assert_eq!(parse_pushback(b"0"), after(0));
        assert_eq!(parse_pushback(b" 1500 "), after(1500));
        assert_eq!(parse_pushback(b"9999999999"), after(9_999_999_999));
        for never in [
            &b"-1"[..],
            b"-250",
            b"",
            b"  ",
            b"12ms",
            b"1.5",
            b"+5",
            b"99999999999",
            b"0000000000000000000000000001",
        ] {
            assert_eq!(parse_pushback(never), Pushback::Never, "{never:?}");
        }
    }

    #[test]
    fn each_refusal_kind_has_the_code_grpc_guidance_gives_it() {
        let refusal = |reason| ResilienceError::new("dep", reason);
        let cases = [
            (
                RefusalReason::BreakerOpen {
                    remaining: Duration::from_millis(1500),
                    cause: crate::OpenCause::Tripped {
                        retry_after: Duration::from_secs(2),
                        reason: "429".into(),
                    },
                },
                Code::Unavailable,
                Some(1500),
            ),
            (
                RefusalReason::BulkheadFull {
                    max_concurrent: 1,
                    max_queued: 0,
                },
                Code::ResourceExhausted,
                None,
            ),
            (
                RefusalReason::BulkheadQueueTimeout {
                    waited: Duration::from_millis(5),
                },
                Code::ResourceExhausted,
                None,
            ),
            (
                RefusalReason::RateLimited {
                    retry_after: Some(Duration::from_micros(2_001)),
                    detail: "rate".into(),
                },
                Code::ResourceExhausted,
                Some(3),
            ),
            (
                RefusalReason::InsufficientBudget {
                    remaining: Duration::from_millis(3),
                    min_budget: Duration::from_millis(50),
                },
                Code::DeadlineExceeded,
                None,
            ),
        ];
        for (reason, code, pushback) in cases {
            let refusal = refusal(reason);
            let status = Status::from(refusal.clone());
            assert_eq!(status.code(), code, "{refusal}");
            assert_eq!(
                status
                    .metadata()
                    .get(RETRY_PUSHBACK_HEADER)
                    .map(|v| v.to_str().unwrap_or_default().to_owned()),
                pushback.map(|ms: u64| ms.to_string()),
                "{refusal}"
            );
            assert_eq!(
                status
                    .metadata()
                    .get(REFUSAL_HEADER)
                    .map(MetadataValue::as_bytes),
                Some(refusal.kind().as_str().as_bytes())
            );
            assert!(!status.message().contains("dep"), "{}", status.message());
            assert!(!status.is_transient(), "our own refusal is never retried");
        }
    }

    #[test]
    fn a_received_status_is_transient_when_unavailable_or_exhausted_with_a_wait() {
        let with_pushback = |code, value: &'static str| {
            let mut metadata = MetadataMap::new();
            metadata.insert(RETRY_PUSHBACK_HEADER, MetadataValue::from_static(value));
            Status::with_metadata(code, "from the wire", metadata)
        };
        assert!(Status::unavailable("down").is_transient());
        assert!(!Status::resource_exhausted("quota").is_transient());
        assert!(with_pushback(Code::ResourceExhausted, "100").is_transient());
        assert!(!with_pushback(Code::ResourceExhausted, "-1").is_transient());
        assert!(!Status::deadline_exceeded("late").is_transient());
        assert!(!Status::invalid_argument("bad").is_transient());
        assert_eq!(
            with_pushback(Code::Unavailable, "-1").pushback(),
            Some(Pushback::Never)
        );
    }
}
