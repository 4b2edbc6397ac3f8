//! What one instance tells the others about an opening: the wire format of the messages on the
//! events channel and in each breaker's state hash, and the checks every message passes before
//! a breaker hears of it.
//!
//! A message is one JSON object, written by the sending instance and published, unchanged, by
//! the store's Lua scripts:
//!
//! ```json
//! {"v":1,"kind":"trip","name":"search","remaining_ms":3000,"instance":"9f2c…","issued_ms":1767225600000,"cause":"…","sig":"…"}
//! ```
//!
//! `kind` is `failures` (counted failures or a failed probe: bounded by the cooldown) or `trip`
//! (a `Retry-After`: bounded by `max_retry_after`); `remaining_ms` is how long the opening
//! lasts from when it was sent; `issued_ms` is the sender's wall clock (milliseconds since the
//! Unix epoch), used only to refuse replays of signed messages; `sig`, present when the store
//! has a shared secret, is HMAC-SHA256 over the prefix and every other field, hex-encoded.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// The largest message accepted; anything longer is dropped unread.
pub(super) const MAX_MESSAGE_BYTES: usize = 4096;
pub(super) const MAX_NAME_BYTES: usize = 256;
const MAX_INSTANCE_BYTES: usize = 128;
const MAX_CAUSE_BYTES: usize = 1024;
const VERSION: u8 = 1;
/// Separates what is signed from anything else a secret might be used for.
pub(super) const SIGNING_CONTEXT: &[u8] = b"velocity-policy-runtime redis_store opening v1";
/// What a failure report's signature is for.
const REPORT_CONTEXT: &[u8] = b"velocity-policy-runtime redis_store failure report v1";
/// The longest failure report accepted: an instance id, a nonce, a time and a signature.
pub(super) const MAX_REPORT_BYTES: usize = 384;
/// The shortest shared secret accepted: 32 bytes, HMAC-SHA256's own output size.
pub(crate) const MIN_SECRET_BYTES: usize = 32;

/// Why a message was dropped. Each is a stable `reason` code in the `store_message_rejected`
/// event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rejection {
    /// Longer than [`MAX_MESSAGE_BYTES`].
    TooLarge,
    /// Not a message of this format: not JSON, an unknown field or version, a field missing,
    /// out of its type's range, too long, or holding control characters.
    Malformed,
    /// Asks for a zero opening, or for longer than the receiving breaker allows.
    OutOfRange,
    /// The store requires signed messages and this one has no signature.
    Unsigned,
    /// The signature does not match (another secret, or a changed field).
    BadSignature,
    /// Signed, but issued too long ago (or too far ahead) to be anything but a replay.
    Stale,
    /// Valid, for a breaker not built here yet, and the map of such openings is full.
    PendingFull,
}

impl Rejection {
    /// The stable `reason` code.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::TooLarge => "too_large",
            Self::Malformed => "malformed",
            Self::OutOfRange => "out_of_range",
            Self::Unsigned => "unsigned",
            Self::BadSignature => "bad_signature",
            Self::Stale => "stale",
            Self::PendingFull => "pending_full",
        }
    }
}

/// What kind of opening a message announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Kind {
    /// Counted failures or a failed probe; at most the cooldown.
    Failures,
    /// A dependency's `Retry-After`; at most `max_retry_after`.
    Trip,
}

impl Kind {
    pub(super) fn is_trip(self) -> bool {
        self == Self::Trip
    }

    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Failures => "failures",
            Self::Trip => "trip",
        }
    }
}

/// One opening, as sent and as received.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Opening {
    v: u8,
    pub(super) kind: Kind,
    pub(super) name: String,
    pub(super) remaining_ms: u64,
    pub(super) instance: String,
    pub(super) issued_ms: u64,
    pub(super) cause: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sig: Option<String>,
}

impl Opening {
    /// An opening to send now. The cause is cut to its limit and stripped of control
    /// characters, so what this instance sends always passes the receivers' checks.
    pub(super) fn new(
        kind: Kind,
        name: &str,
        remaining_ms: u64,
        instance: &str,
        cause: &str,
    ) -> Self {
        Self {
            v: VERSION,
            kind,
            name: name.to_owned(),
            remaining_ms: remaining_ms.max(1),
            instance: instance.to_owned(),
            issued_ms: wall_clock_ms(),
            cause: clean(cause, MAX_CAUSE_BYTES),
            sig: None,
        }
    }

    pub(super) fn remaining(&self) -> Duration {
        Duration::from_millis(self.remaining_ms)
    }
}

/// Milliseconds since the Unix epoch on this machine's wall clock.
pub(super) fn wall_clock_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `text` without control characters (replaced by spaces), cut to `max` bytes on a character
/// boundary.
fn clean(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max));
    for c in text.chars() {
        let c = if c.is_control() { ' ' } else { c };
        if out.len() + c.len_utf8() > max {
            break;
        }
        out.push(c);
    }
    out
}

/// What a failure report signs.
fn report_body(name: &str, instance: &str, nonce: &str, issued_ms: u64) -> String {
    format!("{name}\0{instance}\0{nonce}\0{issued_ms}")
}

fn millis_u64(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn is_clean(text: &str, max: usize) -> bool {
    text.len() <= max && !text.chars().any(char::is_control)
}

/// HMAC-SHA256 keyed with the store's shared secret. Holds only the keyed state, never the
/// secret's bytes, and prints nothing of either.
///
/// One secret signs several kinds of record (breaker openings, failure reports, override sets,
/// and the durable queue's entries): each kind names its own `context`, and every MAC covers
/// the context, then the store's key prefix, then the body, each ended by a zero byte, so a
/// record of one kind or one prefix is never valid as another.
#[derive(Clone)]
pub(crate) struct Signer(Hmac<Sha256>);

impl fmt::Debug for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Signer([redacted])")
    }
}

impl Signer {
    pub(super) fn new(secret: &[u8]) -> Self {
        // HMAC takes a key of any length; `new_from_slice` cannot fail for it.
        let mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret)
            .unwrap_or_else(|_| <Hmac<Sha256> as KeyInit>::new(&Default::default()));
        Self(mac)
    }

    fn mac(&self, context: &[u8], prefix: &str, body: &[u8]) -> Hmac<Sha256> {
        let mut mac = self.0.clone();
        mac.update(context);
        mac.update(&[0]);
        mac.update(prefix.as_bytes());
        mac.update(&[0]);
        mac.update(body);
        mac
    }

    /// The hex HMAC of `body`, for records of the kind `context` under the key prefix `prefix`.
    pub(crate) fn sign(&self, context: &[u8], prefix: &str, body: &[u8]) -> String {
        hex::encode(self.mac(context, prefix, body).finalize().into_bytes())
    }

    /// Whether `sig` (hex) is [`sign`](Self::sign)'s for the same three: `Unsigned` when there
    /// is none, `BadSignature` when it does not match. Compared in constant time.
    pub(crate) fn verify(
        &self,
        context: &[u8],
        prefix: &str,
        body: &[u8],
        sig: Option<&str>,
    ) -> Result<(), Rejection> {
        let tag =
            hex::decode(sig.ok_or(Rejection::Unsigned)?).map_err(|_| Rejection::BadSignature)?;
        self.mac(context, prefix, body)
            .verify_slice(&tag)
            .map_err(|_| Rejection::BadSignature)
    }
}

/// Encodes and checks messages for one store: its key prefix (bound into every signature, so
/// a message cannot be replayed into another prefix), its secret if it has one, and how far
/// apart the instances' wall clocks may be.
#[derive(Debug, Clone)]
pub(super) struct Codec {
    pub(super) prefix: String,
    pub(super) signer: Option<Signer>,
    pub(super) clock_tolerance: Duration,
}

impl Codec {
    /// The hex HMAC of `body` for records of the kind `context` (bound to the prefix), when
    /// the store has a secret.
    pub(super) fn sign(&self, context: &[u8], body: &[u8]) -> Option<String> {
        self.signer
            .as_ref()
            .map(|signer| signer.sign(context, &self.prefix, body))
    }

    /// Whether `sig` signs `body` as a record of the kind `context`, when the store has a
    /// secret (anything goes without one).
    pub(super) fn verify(
        &self,
        context: &[u8],
        body: &[u8],
        sig: Option<&str>,
    ) -> Result<(), Rejection> {
        match &self.signer {
            Some(signer) => signer.verify(context, &self.prefix, body, sig),
            None => Ok(()),
        }
    }

    /// A signed report of one failure of the breaker `name` by `instance`, now: the member the
    /// script adds to the breaker's failures, `instance|nonce|issued_ms|sig`. The signature
    /// covers the breaker's name too, so a report cannot be moved to another breaker. `None`
    /// without a secret (the script then counts unsigned members).
    pub(super) fn failure_report(&self, name: &str, instance: &str) -> Option<String> {
        let signer = self.signer.as_ref()?;
        let nonce = format!("{:016x}", rand::random::<u64>());
        let issued_ms = wall_clock_ms();
        let body = report_body(name, instance, &nonce, issued_ms);
        let sig = signer.sign(REPORT_CONTEXT, &self.prefix, body.as_bytes());
        Some(format!("{instance}|{nonce}|{issued_ms}|{sig}"))
    }

    /// Checks one member of the failures of the breaker `name`: a report signed with this
    /// store's secret, for this breaker, issued within the last `window` (give or take the
    /// clock tolerance). Returns who made it and its nonce (one report, however many copies).
    pub(super) fn check_report(
        &self,
        name: &str,
        member: &[u8],
        now_ms: u64,
        window: Duration,
    ) -> Result<(String, String), Rejection> {
        if member.len() > MAX_REPORT_BYTES {
            return Err(Rejection::TooLarge);
        }
        let member = std::str::from_utf8(member).map_err(|_| Rejection::Malformed)?;
        // The instance may hold `|`: the three fields after it are split from the right.
        let mut fields = member.rsplitn(4, '|');
        let (Some(sig), Some(issued), Some(nonce), Some(instance)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(Rejection::Unsigned);
        };
        let issued_ms: u64 = issued.parse().map_err(|_| Rejection::Malformed)?;
        if !is_clean(instance, MAX_INSTANCE_BYTES) || instance.is_empty() {
            return Err(Rejection::Malformed);
        }
        let body = report_body(name, instance, nonce, issued_ms);
        self.verify(REPORT_CONTEXT, body.as_bytes(), Some(sig))?;
        let tolerance = millis_u64(self.clock_tolerance);
        let oldest = now_ms
            .saturating_sub(millis_u64(window))
            .saturating_sub(tolerance);
        if issued_ms < oldest || issued_ms > now_ms.saturating_add(tolerance) {
            return Err(Rejection::Stale);
        }
        Ok((instance.to_owned(), nonce.to_owned()))
    }

    /// The message for `opening`, signed when the store has a secret.
    pub(super) fn encode(&self, mut opening: Opening) -> String {
        opening.sig = None;
        let body = serde_json::to_vec(&opening).unwrap_or_default();
        opening.sig = self.sign(SIGNING_CONTEXT, &body);
        serde_json::to_string(&opening).unwrap_or_default()
    }

    /// The opening `payload` announces, if it is one this store accepts at `now_ms` (wall
    /// clock): well-formed, and signed and fresh when the store has a secret. Whether its
    /// length fits the receiving breaker is checked where the breaker is known.
    pub(super) fn decode(&self, payload: &[u8], now_ms: u64) -> Result<Opening, Rejection> {
        self.decode_within(payload, now_ms, Duration::ZERO)
    }

    /// As [`decode`](Self::decode), a signed message still fresh for `grace` after its opening
    /// ends: the probation an opening leaves behind lasts the window past its end, and a probe
    /// failing in it reopens the breaker.
    pub(super) fn decode_within(
        &self,
        payload: &[u8],
        now_ms: u64,
        grace: Duration,
    ) -> Result<Opening, Rejection> {
        if payload.len() > MAX_MESSAGE_BYTES {
            return Err(Rejection::TooLarge);
        }
        let mut opening: Opening =
            serde_json::from_slice(payload).map_err(|_| Rejection::Malformed)?;
        let well_formed = opening.v == VERSION
            && !opening.name.is_empty()
            && is_clean(&opening.name, MAX_NAME_BYTES)
            && is_clean(&opening.instance, MAX_INSTANCE_BYTES)
            && is_clean(&opening.cause, MAX_CAUSE_BYTES);
        if !well_formed {
            return Err(Rejection::Malformed);
        }
        if opening.remaining_ms == 0 {
            return Err(Rejection::OutOfRange);
        }
        let sig = opening.sig.take();
        if self.signer.is_some() {
            let body = serde_json::to_vec(&opening).map_err(|_| Rejection::Malformed)?;
            self.verify(SIGNING_CONTEXT, &body, sig.as_deref())?;
            // A genuine message replayed later: refused once its opening, give or take the
            // clock tolerance, is over. A replay can therefore extend an opening by at most its
            // own length and the tolerance, never keep a breaker open.
            let tolerance = millis_u64(self.clock_tolerance);
            let ends = opening
                .issued_ms
                .saturating_add(opening.remaining_ms)
                .saturating_add(tolerance)
                .saturating_add(millis_u64(grace));
            if opening.issued_ms > now_ms.saturating_add(tolerance) || now_ms > ends {
                return Err(Rejection::Stale);
            }
        }
        Ok(opening)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]

    use super::*;

    fn codec(secret: Option<&[u8]>) -> Codec {
        Codec {
            prefix: "policy".to_owned(),
            signer: secret.map(Signer::new),
            clock_tolerance: Duration::from_secs(30),
        }
    }

    fn trip() -> Opening {
        Opening::new(
            Kind::Trip,
            "search",
            3_000,
            "a",
            "the dependency asked for 3s: 429",
        )
    }

    #[test]
    fn what_is_sent_is_received_unchanged() {
        for secret in [None, Some(&b"s3cret"[..])] {
            let c = codec(secret);
            let sent = trip();
            let got = c.decode(c.encode(sent.clone()).as_bytes(), wall_clock_ms());
            assert_eq!(got, Ok(sent));
        }
    }

    #[test]
    fn the_old_line_format_and_other_garbage_are_malformed() {
        let c = codec(None);
        let now = wall_clock_ms();
        for payload in [
            "failures\nsearch\n18446744073709551615\nx\nforever",
            "",
            "{}",
            "[1,2]",
            r#"{"v":2,"kind":"trip","name":"s","remaining_ms":1,"instance":"a","issued_ms":0,"cause":""}"#,
            r#"{"v":1,"kind":"forever","name":"s","remaining_ms":1,"instance":"a","issued_ms":0,"cause":""}"#,
            r#"{"v":1,"kind":"trip","name":"","remaining_ms":1,"instance":"a","issued_ms":0,"cause":""}"#,
            r#"{"v":1,"kind":"trip","name":"s","remaining_ms":18446744073709551616,"instance":"a","issued_ms":0,"cause":""}"#,
            r#"{"v":1,"kind":"trip","name":"s","remaining_ms":-1,"instance":"a","issued_ms":0,"cause":""}"#,
            r#"{"v":1,"kind":"trip","name":"s","remaining_ms":1,"instance":"a","issued_ms":0,"cause":"\u001b[2J"}"#,
            r#"{"v":1,"kind":"trip","name":"s","remaining_ms":1,"instance":"a","issued_ms":0,"cause":"","extra":1}"#,
        ] {
            assert_eq!(
                c.decode(payload.as_bytes(), now),
                Err(Rejection::Malformed),
                "{payload}"
            );
        }
        let big = format!(
            r#"{{"v":1,"kind":"trip","name":"s","remaining_ms":1,"instance":"a","issued_ms":0,"cause":"{}"}}"#,
            "x".repeat(MAX_MESSAGE_BYTES)
        );
        assert_eq!(c.decode(big.as_bytes(), now), Err(Rejection::TooLarge));
        let zero = r#"{"v":1,"kind":"trip","name":"s","remaining_ms":0,"instance":"a","issued_ms":0,"cause":""}"#;
        assert_eq!(c.decode(zero.as_bytes(), now), Err(Rejection::OutOfRange));
    }

    #[test]
    fn a_store_with_a_secret_takes_only_fresh_messages_signed_with_it() {
        let now = wall_clock_ms();
        let ours = codec(Some(b"s3cret"));
        let unsigned = codec(None).encode(trip());
        assert_eq!(
            ours.decode(unsigned.as_bytes(), now),
            Err(Rejection::Unsigned)
        );
        let theirs = codec(Some(b"another")).encode(trip());
        assert_eq!(
            ours.decode(theirs.as_bytes(), now),
            Err(Rejection::BadSignature)
        );
        // Signed into another prefix: not valid here.
        let mut elsewhere = codec(Some(b"s3cret"));
        elsewhere.prefix = "billing".to_owned();
        let moved = elsewhere.encode(trip());
        assert_eq!(
            ours.decode(moved.as_bytes(), now),
            Err(Rejection::BadSignature)
        );
        // A changed field breaks the signature.
        let forged = ours
            .encode(trip())
            .replace("\"remaining_ms\":3000", "\"remaining_ms\":300000");
        assert_eq!(
            ours.decode(forged.as_bytes(), now),
            Err(Rejection::BadSignature)
        );
        // Replayed after its opening and the tolerance: stale; within them: accepted.
        let genuine = ours.encode(trip());
        assert!(ours.decode(genuine.as_bytes(), now + 33_000).is_ok());
        assert_eq!(
            ours.decode(genuine.as_bytes(), now + 33_100),
            Err(Rejection::Stale)
        );
        assert_eq!(
            ours.decode(genuine.as_bytes(), now.saturating_sub(31_000)),
            Err(Rejection::Stale),
            "issued too far ahead of this clock"
        );
    }

    #[test]
    fn what_this_instance_sends_is_cleaned_to_pass_the_checks() {
        let c = codec(None);
        let noisy = Opening::new(
            Kind::Trip,
            "s",
            1,
            "a",
            &format!("bad\nline\u{1b}{}", "é".repeat(2000)),
        );
        assert!(noisy.cause.len() <= MAX_CAUSE_BYTES);
        assert!(
            c.decode(c.encode(noisy).as_bytes(), wall_clock_ms())
                .is_ok()
        );
    }

    #[test]
    fn a_failure_report_counts_only_for_its_breaker_its_fleet_and_its_window() {
        let ours = codec(Some(b"s3cret"));
        let window = Duration::from_secs(30);
        let now = wall_clock_ms();
        let report = ours.failure_report("search", "inst|with|bars").unwrap();
        let (instance, nonce) = ours
            .check_report("search", report.as_bytes(), now, window)
            .unwrap();
        assert_eq!(instance, "inst|with|bars");
        assert_eq!(nonce.len(), 16);
        // Moved to another breaker, made with another secret, or unsigned: not counted.
        assert_eq!(
            ours.check_report("payments", report.as_bytes(), now, window),
            Err(Rejection::BadSignature)
        );
        let theirs = codec(Some(b"another"))
            .failure_report("search", "a")
            .unwrap();
        assert_eq!(
            ours.check_report("search", theirs.as_bytes(), now, window),
            Err(Rejection::BadSignature)
        );
        assert_eq!(
            ours.check_report("search", b"mallory|1", now, window),
            Err(Rejection::Unsigned)
        );
        assert_eq!(
            ours.check_report("search", b"mallory|1|yesterday|00", now, window),
            Err(Rejection::Malformed)
        );
        // Older than the window and the tolerance: stale.
        assert!(
            ours.check_report("search", report.as_bytes(), now + 59_000, window)
                .is_ok()
        );
        assert_eq!(
            ours.check_report("search", report.as_bytes(), now + 61_000, window),
            Err(Rejection::Stale)
        );
        assert_eq!(codec(None).failure_report("search", "a"), None);
    }

    #[test]
    fn the_signer_prints_no_secret() {
        let signer = Signer::new(b"hunter2-s3cret");
        let printed = format!("{signer:?} {:?}", codec(Some(b"hunter2-s3cret")));
        assert!(!printed.contains("hunter2"), "{printed}");
        assert!(printed.contains("redacted"));
    }
}
