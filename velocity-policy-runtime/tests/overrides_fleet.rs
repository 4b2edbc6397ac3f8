//! Fleet reload: an override set published through Redis reaches every instance following
//! it, each validating it against its own compiled policy, against a real `redis-server`.
//!
//! Two instances are two registries (each with its own `Overrides` and its own store) in one
//! process. Real time is used (what crosses the network is the point); every wait polls the
//! snapshot or the registry entry with a bound, none is a fixed sleep.
#![cfg(all(feature = "overrides", feature = "redis"))]
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use velocity_policy_lang::overrides::{PolicyFile, overridden};
use velocity_policy_runtime::Registry;
use velocity_policy_runtime::deadline::OperationDeadline;
use velocity_policy_runtime::overrides::{Following, Overrides, OverridesError, publish};
use velocity_policy_runtime::redis_store::{FleetError, FleetPolicyFile, RedisStore};
use velocity_policy_testkit::RedisServer;

const COMPILED: &str = "\
retry transient { attempts = 3; backoff = full_jitter(base = 10ms, cap = 100ms); attempt_timeout = 500ms }
operation search: critical, idempotent { retry = transient; deadline = 2s; min_budget = 100ms }
chaos search_drill { error at 100%; enabled = false }
";

/// How long a publication may take to reach an instance on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(10);

/// A fresh compiled `policies/` and a directory a publisher publishes from.
struct Policies {
    root: PathBuf,
}

impl Policies {
    fn new(test: &str) -> Self {
        let root = std::env::temp_dir().join(format!(
            "policy-overrides-fleet-{test}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("publish")).unwrap();
        std::fs::write(root.join("search.policy"), COMPILED).unwrap();
        Self { root }
    }

    fn publishing(&self, text: &str) -> PathBuf {
        let file = self.root.join("publish/search.policy");
        std::fs::write(&file, text).unwrap();
        file
    }

    fn path(&self) -> &Path {
        &self.root
    }
}

impl Drop for Policies {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// One instance: its registry, its overrides (no environment: compiled numbers until the
/// fleet publishes), its store and its subscription.
struct Instance {
    registry: &'static Registry,
    store: RedisStore,
    _following: Following,
}

impl Instance {
    /// Re-syncs once a minute: within a test, only the announcement brings a set.
    async fn start(server: &RedisServer, label: &str, id: &str, policies: &Policies) -> Self {
        let store = RedisStore::builder()
            .prefix(server.key_prefix(label))
            .instance(id)
            .timeout(Duration::from_secs(2))
            .resync_every(Duration::from_secs(60))
            .shared_secret("the fleet secret, 32 bytes or more")
            .connect(&server.url())
            .await
            .unwrap();
        Self::with_store(store, policies).await
    }

    async fn with_store(store: RedisStore, policies: &Policies) -> Self {
        let registry: &'static Registry = Box::leak(Box::new(Registry::new()));
        let overrides = Arc::new(
            Overrides::builder(policies.path())
                .registry(registry)
                .strict(true)
                .load()
                .unwrap(),
        );
        let following = overrides.follow(&store).await;
        Self {
            registry,
            store,
            _following: following,
        }
    }

    /// What an annotated `search` reads on its next call.
    fn search(&self) -> Arc<OperationDeadline> {
        self.registry.operation_deadline(
            "shop::search",
            Duration::from_secs(2),
            Duration::from_millis(100),
        )
    }

    /// Waits (boundedly) until the snapshot has applied `sets` sets and refused `refusals`.
    async fn until(&self, sets: u64, refusals: u64) {
        let start = Instant::now();
        loop {
            let overrides = self.registry.snapshot().overrides;
            if overrides.applied >= sets && overrides.refusals >= refusals {
                return;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "no set reached the instance in {PATIENCE:?}: {overrides:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// What `policy check --against` prints for `compiled` with `file` as its override.
fn policy_check(compiled: &Path, file: &Path) -> String {
    let compiled = PolicyFile::read_dir(compiled).unwrap();
    let merged = overridden(&compiled, &[PolicyFile::read(file).unwrap()]);
    let report = merged.check();
    assert!(report.has_errors());
    report
        .errors
        .iter()
        .map(|error| merged.set.render(error))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_published_set_reaches_every_instance_and_a_bad_one_is_refused_by_each() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let policies = Policies::new("reach");
    let a = Instance::start(&server, "fleet", "instance-a", &policies).await;
    let b = Instance::start(&server, "fleet", "instance-b", &policies).await;
    for instance in [&a, &b] {
        assert_eq!(instance.search().current().0, Duration::from_secs(2));
        assert!(instance.registry.snapshot().overrides.fleet.is_none());
    }

    // Published from instance a's store: both apply it, a included.
    policies.publishing("operation search { deadline = 700ms }\n");
    let version = publish(&a.store, policies.path().join("publish"))
        .await
        .unwrap();
    for instance in [&a, &b] {
        instance.until(2, 0).await;
        assert_eq!(
            instance.search().current(),
            (Duration::from_millis(700), Duration::from_millis(100))
        );
        let overrides = instance.registry.snapshot().overrides;
        let fleet = overrides.fleet.unwrap();
        assert_eq!(fleet.version, version);
        assert_eq!(&*fleet.publisher, "instance-a");
        assert!(fleet.published_at_unix_ms > 0);
        assert_eq!(&*overrides.settings[0].value, "700ms");
        // The JSON the dashboard renders says where it came from.
        let json = serde_json::to_value(instance.registry.snapshot()).unwrap();
        assert_eq!(json["overrides"]["fleet"]["publisher"], "instance-a");
    }

    // An unsafe set (an attempt timeout of 500ms above a 300ms deadline): each instance
    // refuses it with `policy check`'s rendering, and keeps 700ms.
    let file = policies.publishing("operation search { deadline = 300ms }\n");
    let expected = policy_check(policies.path(), &file);
    let refused = publish(&b.store, policies.path().join("publish"))
        .await
        .unwrap();
    for instance in [&a, &b] {
        instance.until(2, 1).await;
        assert_eq!(instance.search().current().0, Duration::from_millis(700));
        let overrides = instance.registry.snapshot().overrides;
        let refusal = overrides.refused.unwrap();
        assert_eq!(&*refusal.rendered, expected);
        assert!(expected.contains("policy::attempt-timeout-exceeds-deadline"));
        assert!(expected.contains(&format!("{}:1:", file.display())));
        assert_eq!(refusal.fleet.unwrap().version, refused);
        // The set in force is still the one instance a published.
        assert_eq!(overrides.fleet.unwrap().version, version);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_started_after_a_publication_starts_on_the_latest_set() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let policies = Policies::new("late");
    let early = Instance::start(&server, "late", "early", &policies).await;
    policies.publishing("operation search { deadline = 900ms }\n");
    publish(&early.store, policies.path().join("publish"))
        .await
        .unwrap();
    policies.publishing("operation search { deadline = 650ms }\n");
    let latest = publish(&early.store, policies.path().join("publish"))
        .await
        .unwrap();

    // Nobody told it: it reads the key when it starts following, before its first call.
    let late = Instance::start(&server, "late", "late", &policies).await;
    assert_eq!(late.search().current().0, Duration::from_millis(650));
    assert_eq!(
        late.registry.snapshot().overrides.fleet.unwrap().version,
        latest
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_whose_announcement_was_missed_arrives_with_the_next_resync() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let policies = Policies::new("missed");
    let prefix = server.key_prefix("missed");
    let store = RedisStore::builder()
        .prefix(&prefix)
        .timeout(Duration::from_secs(2))
        .resync_every(Duration::from_millis(200))
        .connect(&server.url())
        .await
        .unwrap();
    let instance = Instance::with_store(store, &policies).await;
    // Stored as a publisher stores it, but never announced: a message lost in flight.
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let set = serde_json::json!({
        "v": 2,
        "version": 7,
        "publisher": "elsewhere",
        "published_ms": 1,
        "files": [{ "name": "lost.policy", "text": "operation search { deadline = 600ms }\n" }],
    });
    let key = format!("{prefix}:overrides:{{fleet}}");
    let () = redis::cmd("HSET")
        .arg(&key)
        .arg("set")
        .arg(set.to_string())
        .arg("version")
        .arg(7)
        .query_async(&mut conn)
        .await
        .unwrap();
    instance.until(2, 0).await;
    assert_eq!(instance.search().current().0, Duration::from_millis(600));
    let fleet = instance.registry.snapshot().overrides.fleet.unwrap();
    assert_eq!((fleet.version, &*fleet.publisher), (7, "elsewhere"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_not_signed_with_the_fleets_secret_is_not_applied() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let policies = Policies::new("unsigned");
    let instance = Instance::start(&server, "unsigned", "signed", &policies).await;
    // A writer without the secret.
    let forger = RedisStore::builder()
        .prefix(server.key_prefix("unsigned"))
        .timeout(Duration::from_secs(2))
        .connect(&server.url())
        .await
        .unwrap();
    forger
        .publish_overrides(vec![FleetPolicyFile {
            name: "forged.policy".to_owned(),
            text: "operation search { deadline = 150ms }\n".to_owned(),
        }])
        .await
        .unwrap();
    assert_eq!(
        instance.store.latest_overrides().await,
        Err(FleetError::Rejected("unsigned"))
    );
    // Its follower read the same key (announced); the numbers stay compiled.
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(500) {
        assert_eq!(instance.search().current().0, Duration::from_secs(2));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(instance.registry.snapshot().overrides.applied, 1);
}

#[tokio::test]
async fn a_set_that_cannot_be_read_is_an_error_naming_the_file() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let policies = Policies::new("binary");
    std::fs::write(policies.path().join("publish/bad.policy"), [0xff, 0xfe]).unwrap();
    let store = RedisStore::builder()
        .prefix(server.key_prefix("binary"))
        .connect(&server.url())
        .await
        .unwrap();
    let error = publish(&store, policies.path().join("publish"))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, OverridesError::Fleet(FleetError::NotText(name)) if name.ends_with("bad.policy")),
        "{error}"
    );
    assert_eq!(store.latest_overrides().await, Ok(None));
}

// ---- Issue 39: the fleet's set has a ceiling, cannot be rolled back, never arms a drill ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_signed_set_cannot_be_replayed_as_a_newer_one() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let policies = Policies::new("replay");
    let a = Instance::start(&server, "replay", "instance-a", &policies).await;
    let key = format!("{}:overrides:{{fleet}}", server.key_prefix("replay"));
    policies.publishing("operation search { deadline = 900ms }\n");
    let first = publish(&a.store, policies.path().join("publish"))
        .await
        .unwrap();
    a.until(2, 0).await;
    // What a writer to Redis keeps of it: the genuine, signed set.
    let old = server.query(&["HGET", &key, "set"]).unwrap();
    policies.publishing("operation search { deadline = 700ms }\n");
    let second = publish(&a.store, policies.path().join("publish"))
        .await
        .unwrap();
    assert_eq!(second, first + 1);
    a.until(3, 0).await;
    assert_eq!(a.search().current().0, Duration::from_millis(700));

    // Written back with a higher version beside it: the version that counts is the signed one.
    server
        .query(&["HSET", &key, "set", &old, "version", "99"])
        .unwrap();
    assert_eq!(
        a.store.latest_overrides().await.unwrap().unwrap().version,
        first
    );
    // And with a higher version inside it, the signature breaks.
    let bumped = old.replace(&format!("\"version\":{first},"), "\"version\":99,");
    assert_ne!(bumped, old);
    server
        .query(&["HSET", &key, "set", &bumped, "version", "99"])
        .unwrap();
    assert_eq!(
        a.store.latest_overrides().await,
        Err(FleetError::Rejected("bad_signature"))
    );
    // Back to the older genuine set, announced: the follower refuses it as a replay.
    server.query(&["HSET", &key, "set", &old]).unwrap();
    server
        .query(&[
            "PUBLISH",
            &format!(
                "{{{}:breaker:events}}:overrides",
                server.key_prefix("replay")
            ),
            "99",
        ])
        .unwrap();
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(500) {
        assert_eq!(a.search().current().0, Duration::from_millis(700));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let overrides = a.registry.snapshot().overrides;
    assert_eq!(overrides.applied, 3, "{overrides:?}");
    assert_eq!(overrides.fleet.unwrap().version, second);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleets_set_moves_numbers_only_within_their_envelope_and_never_arms_a_drill() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let policies = Policies::new("envelope");
    let a = Instance::start(&server, "envelope", "instance-a", &policies).await;
    let drill = a.registry.chaos("search_drill");
    let mut refusals = 0;
    for (text, code) in [
        // A quarter of 100ms is 25ms; four times 3 attempts is 12.
        (
            "operation search { min_budget = 10ms }\n",
            "policy::override-outside-envelope",
        ),
        (
            "retry transient { attempts = 100 }\n",
            "policy::override-outside-envelope",
        ),
        (
            "chaos search_drill { enabled = true }\n",
            "policy::not-overridable",
        ),
    ] {
        policies.publishing(text);
        publish(&a.store, policies.path().join("publish"))
            .await
            .unwrap();
        refusals += 1;
        a.until(1, refusals).await;
        let refused = a.registry.snapshot().overrides.refused.unwrap();
        assert_eq!(refused.codes.len(), 1, "{text}: {refused:?}");
        assert_eq!(&*refused.codes[0], code, "{text}");
        assert_eq!(
            a.search().current(),
            (Duration::from_secs(2), Duration::from_millis(100))
        );
    }
    assert!(!drill.is_on(), "the fleet switched a drill on");
    // Inside the envelope: applied.
    policies
        .publishing("operation search { min_budget = 25ms }\nretry transient { attempts = 12 }\n");
    publish(&a.store, policies.path().join("publish"))
        .await
        .unwrap();
    a.until(2, refusals).await;
    assert_eq!(a.search().current().1, Duration::from_millis(25));
}

#[tokio::test]
async fn a_100_mb_override_set_never_crosses_the_wire() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let prefix = server.key_prefix("huge-set");
    let key = format!("{prefix}:overrides:{{fleet}}");
    let store = RedisStore::builder()
        .prefix(&prefix)
        .timeout(Duration::from_secs(2))
        .connect(&server.url())
        .await
        .unwrap();
    // Made on the server, so the test sends none of it either.
    let _ = server.query(&[
        "EVAL",
        "redis.call('HSET', KEYS[1], 'set', string.rep('x', 104857600), 'version', '1') return 1",
        "1",
        &key,
    ]);
    let start = Instant::now();
    while server.query(&["PING"]).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the script never ended"
        );
    }
    let sent = |server: &RedisServer| -> u64 {
        let info = server.query(&["INFO", "stats"]).unwrap();
        info.lines()
            .find_map(|line| line.strip_prefix("total_net_output_bytes:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let before = sent(&server);
    for _ in 0..3 {
        assert_eq!(
            store.latest_overrides().await,
            Err(FleetError::Rejected("too_large"))
        );
    }
    let crossed = sent(&server) - before;
    eprintln!("three reads of a 100 MB override set: {crossed} bytes crossed the wire");
    assert!(crossed < 64 * 1024, "{crossed} bytes crossed the wire");
}
