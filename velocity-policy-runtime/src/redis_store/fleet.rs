//! A fleet's override set in Redis (features `redis` and `overrides`): published whole under
//! one key, announced on a channel; see [`crate::overrides`]'s "Fleet reload".
//!
//! The key is the truth and the channel only news: a message says "read the key again" and
//! carries nothing else, so a message missed (a reconnection, a subscriber that was not there
//! yet) costs only the wait for the next re-sync, when every follower reads the key again, and
//! an instance started later reads it when it starts following.

use std::fmt;
use std::sync::atomic::Ordering;

use redis::{Script, Value};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::message::wall_clock_ms;
use super::{RedisStore, Shared};

/// The largest set accepted, published or read: a set is a few override files.
const MAX_SET_BYTES: usize = 256 * 1024;
/// How many publications may land between learning the stored version and storing the next
/// before a publisher gives up.
const PUBLISH_ATTEMPTS: u32 = 8;
/// The longest publisher id or file name accepted.
const MAX_LABEL_BYTES: usize = 256;
/// The message format: 2 signs the set's version and publication time with it.
const VERSION: u8 = 2;
/// What an override set's signature is for (see [`super::Signer`]).
const SIGNING_CONTEXT: &[u8] = b"velocity-policy-runtime redis_store override set v1";

/// One override file of a published set: the name diagnostics print for it, and its text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetPolicyFile {
    /// The name diagnostics print (the publisher's path, say `policies/production/search.policy`).
    pub name: String,
    /// The file's text.
    pub text: String,
}

/// The override set the fleet's key holds: what [`RedisStore::latest_overrides`] reads.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FleetOverrides {
    /// Counts the publications into this key (one more for each set published); signed with
    /// the set, so an older set cannot be passed off as a newer one.
    pub version: u64,
    /// The publishing instance's id ([`RedisStore::instance`]).
    pub publisher: String,
    /// When it was published, in milliseconds since the Unix epoch (the publisher's clock).
    pub published_at_unix_ms: u64,
    /// The override files.
    pub files: Vec<FleetPolicyFile>,
}

/// The set as stored: signed, when the store has a shared secret, over everything but `sig`
/// (its version and publication time included).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    v: u8,
    version: u64,
    publisher: String,
    published_ms: u64,
    files: Vec<FleetPolicyFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sig: Option<String>,
}

/// Why a set could not be published or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FleetError {
    /// Redis did not answer, or refused the command (what failed, never its address).
    #[error("redis could not be reached for the fleet's overrides ({0}); the set in force stays")]
    Unavailable(String),
    /// The set is larger than 256 KiB.
    #[error(
        "the override set is {0} bytes, more than the 256 KiB a fleet's set may be: publish fewer or smaller files"
    )]
    TooLarge(usize),
    /// A file is not UTF-8 text.
    #[error("the override file `{0}` is not UTF-8 text")]
    NotText(String),
    /// The stored set is not one this instance accepts: `malformed`, `too_large`, `unsigned`
    /// or `bad_signature` (a shared secret is set and the set is not signed with it), and,
    /// for a follower, `replayed` (older than a set it already had) or `stale` (published
    /// ahead of its clock, or before the set it already had).
    #[error(
        "the fleet's override set in redis was not accepted ({0}); the set in force stays: publish it again with `velocity_policy_runtime::overrides::publish`"
    )]
    Rejected(&'static str),
}

impl Shared {
    /// `<prefix>:overrides:{fleet}`: a hash of `set` (the JSON, its version inside) and
    /// `version` (the same number, for the publish script's comparison).
    fn overrides_key(&self) -> String {
        format!("{}:overrides:{{fleet}}", self.prefix)
    }

    /// Where a publication is announced: `{<prefix>:breaker:events}:overrides`. The hash tag is
    /// the breaker channel's whole name, so on a cluster both sharded channels live in one slot
    /// and one shard's subscription carries both: a failover re-subscribes one shard, as it did
    /// before this channel existed.
    pub(super) fn overrides_channel(&self) -> String {
        format!("{{{}}}:overrides", self.channel())
    }
}

fn clean(label: &str) -> bool {
    !label.is_empty() && label.len() <= MAX_LABEL_BYTES && !label.chars().any(char::is_control)
}

impl RedisStore {
    /// Publishes `files` as the fleet's override set: stored under one key (replacing the set
    /// before it, so an instance that starts or reconnects later reads it), then announced to
    /// every instance following the fleet's overrides ([`Overrides::follow`]), each of which
    /// validates it against its own compiled policy before applying it. Returns the set's
    /// version. The set is signed when the store has a
    /// [shared secret](super::RedisStoreBuilder::shared_secret).
    ///
    /// # Errors
    ///
    /// A set over 256 KiB, a file name that is empty, too long or holds control characters,
    /// or Redis not answering within the store's timeout.
    ///
    /// [`Overrides::follow`]: crate::overrides::Overrides::follow
    pub async fn publish_overrides(&self, files: Vec<FleetPolicyFile>) -> Result<u64, FleetError> {
        let shared = &self.shared;
        if let Some(file) = files.iter().find(|file| !clean(&file.name)) {
            return Err(FleetError::NotText(file.name.clone()));
        }
        let mut stored = Stored {
            v: VERSION,
            version: 0,
            publisher: shared.instance.to_string(),
            published_ms: wall_clock_ms(),
            files,
            sig: None,
        };
        let key = shared.overrides_key();
        let script = Script::new(include_str!("lua/publish_overrides.lua"));
        let mut conn = self.connection();
        // The version is signed with the set: learn the one stored (proposing 0), then store
        // the next, unless another publisher stored one first (then once more after it).
        let mut proposed = 0;
        let mut attempts = 0;
        let version = loop {
            let json = if proposed == 0 {
                String::new()
            } else {
                stored.version = proposed;
                stored.sig = None;
                let body = serde_json::to_vec(&stored).unwrap_or_default();
                stored.sig = self
                    .signer()
                    .map(|signer| signer.sign(SIGNING_CONTEXT, self.prefix(), &body));
                let json = serde_json::to_string(&stored).unwrap_or_default();
                if json.len() > MAX_SET_BYTES {
                    return Err(FleetError::TooLarge(json.len()));
                }
                json
            };
            let mut call = script.prepare_invoke();
            call.key(&key).arg(&json).arg(proposed);
            let (stored_now, current): (u8, u64) = shared
                .invoke(call.invoke_async(&mut conn))
                .await
                .ok_or_else(|| FleetError::Unavailable(unavailable(shared)))?;
            if stored_now == 1 {
                break current;
            }
            attempts += 1;
            if attempts > PUBLISH_ATTEMPTS {
                return Err(FleetError::Unavailable(
                    "other publications kept landing first".to_owned(),
                ));
            }
            proposed = current.saturating_add(1);
        };
        let mut publish = redis::cmd(shared.topology.publish());
        publish.arg(shared.overrides_channel()).arg(version);
        // The announcement is news only: missed, the next re-sync reads the key.
        let _: Option<i64> = shared.invoke(publish.query_async(&mut conn)).await;
        tracing::info!(
            target: "policy",
            mechanism = "store",
            kind = "overrides_published",
            name = "redis",
            instance = &*shared.instance,
            version,
            files = stored.files.len(),
            "override set {version} published to the fleet ({} file(s))",
            stored.files.len()
        );
        Ok(version)
    }

    /// The fleet's override set as stored now, checked (well-formed, at most 256 KiB, and
    /// signed with the store's shared secret when it has one); `None` when none was published.
    ///
    /// # Errors
    ///
    /// Redis not answering within the store's timeout, or a set this instance does not accept.
    pub async fn latest_overrides(&self) -> Result<Option<FleetOverrides>, FleetError> {
        let shared = &self.shared;
        let mut conn = self.connection();
        // Measured by the script before it is sent: a set over the bound never crosses the wire.
        let script = Script::new(include_str!("lua/read_overrides.lua"));
        let mut call = script.prepare_invoke();
        call.key(shared.overrides_key()).arg(MAX_SET_BYTES);
        let values: Vec<Value> = shared
            .invoke(call.invoke_async(&mut conn))
            .await
            .ok_or_else(|| FleetError::Unavailable(unavailable(shared)))?;
        let json = match values.as_slice() {
            [Value::Int(1), Value::BulkString(json)] => json,
            [Value::Int(2), ..] => return Err(FleetError::Rejected("too_large")),
            _ => return Ok(None),
        };
        if json.len() > MAX_SET_BYTES {
            return Err(FleetError::Rejected("too_large"));
        }
        let mut stored: Stored =
            serde_json::from_slice(json).map_err(|_| FleetError::Rejected("malformed"))?;
        if stored.v != VERSION
            || !clean(&stored.publisher)
            || stored.files.iter().any(|file| !clean(&file.name))
        {
            return Err(FleetError::Rejected("malformed"));
        }
        let sig = stored.sig.take();
        let body = serde_json::to_vec(&stored).map_err(|_| FleetError::Rejected("malformed"))?;
        shared
            .breakers
            .codec()
            .verify(SIGNING_CONTEXT, &body, sig.as_deref())
            .map_err(|rejection| FleetError::Rejected(rejection.as_str()))?;
        Ok(Some(FleetOverrides {
            version: stored.version,
            publisher: stored.publisher,
            published_at_unix_ms: stored.published_ms,
            files: stored.files,
        }))
    }

    /// Whether `set` may follow the set `after` (the one this follower last had, if any) at
    /// `now_ms` on this clock: not older (`replayed`: a lower version, or the same version
    /// with other contents), not published ahead of this clock or before `after` beyond the
    /// store's clock tolerance (`stale`).
    pub(crate) fn check_succession(
        &self,
        set: &FleetOverrides,
        after: Option<&FleetOverrides>,
        now_ms: u64,
    ) -> Result<(), FleetError> {
        let tolerance = u64::try_from(self.shared.breakers.codec().clock_tolerance.as_millis())
            .unwrap_or(u64::MAX);
        if set.published_at_unix_ms > now_ms.saturating_add(tolerance) {
            return Err(FleetError::Rejected("stale"));
        }
        if let Some(after) = after {
            if set.version < after.version || (set.version == after.version && set != after) {
                return Err(FleetError::Rejected("replayed"));
            }
            if set.published_at_unix_ms.saturating_add(tolerance) < after.published_at_unix_ms {
                return Err(FleetError::Rejected("stale"));
            }
        }
        Ok(())
    }

    /// Changes whenever a set may have been published: a message on the channel, a
    /// re-subscription after a reconnection, each re-sync.
    pub(crate) fn overrides_news(&self) -> watch::Receiver<u64> {
        self.shared.overrides_news.subscribe()
    }
}

/// What an unanswered call is described as (the store's outage event has the detail).
fn unavailable(shared: &Shared) -> String {
    if shared.healthy.load(Ordering::Relaxed) {
        "an error".to_owned()
    } else {
        "unreachable".to_owned()
    }
}

impl fmt::Display for FleetOverrides {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the fleet's set {} from `{}`",
            self.version, self.publisher
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]

    use super::*;

    fn set(version: u64, published: u64, text: &str) -> FleetOverrides {
        FleetOverrides {
            version,
            publisher: "a".to_owned(),
            published_at_unix_ms: published,
            files: vec![FleetPolicyFile {
                name: "f.policy".to_owned(),
                text: text.to_owned(),
            }],
        }
    }

    #[tokio::test]
    async fn a_set_follows_only_an_older_one_and_never_comes_from_the_future() {
        // Never connected: the check is local.
        let store = RedisStore::builder()
            .timeout(std::time::Duration::from_millis(10))
            .clock_tolerance(std::time::Duration::from_secs(30))
            .connect("redis://127.0.0.1:1/")
            .await
            .unwrap();
        let now = 1_800_000_000_000;
        let first = set(4, now - 60_000, "a");
        assert_eq!(store.check_succession(&first, None, now), Ok(()));
        assert_eq!(
            store.check_succession(&set(5, now + 31_000, "b"), None, now),
            Err(FleetError::Rejected("stale")),
            "published ahead of this clock"
        );
        assert_eq!(
            store.check_succession(&set(5, now, "b"), Some(&first), now),
            Ok(())
        );
        assert_eq!(
            store.check_succession(&set(3, now, "b"), Some(&first), now),
            Err(FleetError::Rejected("replayed"))
        );
        assert_eq!(
            store.check_succession(&set(4, now, "b"), Some(&first), now),
            Err(FleetError::Rejected("replayed")),
            "the same version with other contents"
        );
        assert_eq!(
            store.check_succession(&set(9, now - 120_000, "b"), Some(&first), now),
            Err(FleetError::Rejected("stale")),
            "published before the set in force"
        );
    }
}
