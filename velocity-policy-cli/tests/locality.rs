//! `policy locality`, run as a user would, on environment files with synthetic hosts.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a failure should stop the test"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use velocity_policy_delivery::locality::LocalityMap;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/locality")
        .join(name)
}

/// Runs `policy locality ARGS` with an empty process environment (so that only what a test
/// gives counts), in the fixtures' directory (so that reports name files relatively).
fn locality(args: &[&str]) -> Output {
    locality_with_env(args, &[])
}

fn locality_with_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_policy"))
        .arg("locality")
        .args(args)
        .current_dir(fixture(""))
        .env_clear()
        .env("NO_COLOR", "1")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// Standard error, with the lines miette wrapped at the terminal's width joined back.
fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone())
        .unwrap()
        .replace("\n  | ", " ")
        .replace("\n        ", " ")
}

/// Writes `text` to a file of this name in a directory of this test run, and returns its path.
fn write(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("policy-locality-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn prints_the_derived_map_then_each_declared_hop() {
    let output = locality(&["--env-file", "production.env", "service.policy"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "\
compute              eu-central-1  Vercel         env:VERCEL_REGION=fra1
relational database  eu-central-1  Neon           env:DATABASE_URL
object storage       —             Cloudflare R2  env:R2_URL                  R2 has no region
cache                us-east-1     Upstash        env:UPSTASH_REDIS_REST_URL

blocking  compute → database  env:DATABASE_URL            same region      eu-central-1
blocking  compute → cache     env:UPSTASH_REDIS_REST_URL  crosses regions  eu-central-1 → us-east-1
async     compute → assets    env:R2_URL                  unknown          R2 has no region
"
    );
    // Without `--check` nothing is judged.
    assert_eq!(stderr(&output), "");
}

#[test]
fn without_files_only_the_map_is_printed() {
    let output = locality(&["--env-file", "production.env"]);
    assert_eq!(output.status.code(), Some(0));
    let out = stdout(&output);
    assert!(
        out.starts_with("compute              eu-central-1  Vercel"),
        "{out}"
    );
    assert!(!out.contains("compute →"), "{out}");
}

#[test]
fn check_fails_on_a_blocking_hop_that_crosses_regions() {
    let output = locality(&["--check", "--env-file", "production.env", "service.policy"]);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert_eq!(err.matches("policy::cross-region-hop").count(), 1, "{err}");
    assert!(
        err.contains(
            "blocking hop `cache` crosses regions: the compute runs in `eu-central-1`, the service in `us-east-1`"
        ),
        "{err}"
    );
    assert!(err.contains("service.policy:4:13"), "{err}");
    assert!(err.contains("locates the service in `us-east-1`"), "{err}");
    assert!(
        err.contains("help: the request pays the distance on every round trip: move the compute to `us-east-1` or the service to `eu-central-1`, or make the hop `async`"),
        "{err}"
    );
    // The async hop to R2, whose region is unknown, is not a finding: the request does not wait.
    assert!(!err.contains("policy::unknown-region"), "{err}");
    assert!(
        err.contains("policy locality: 1 error, 0 warnings in 3 hops"),
        "{err}"
    );
}

#[test]
fn check_passes_when_every_blocking_hop_stays_in_the_region() {
    let output = locality(&["--check", "--env-file", "same-region.env", "service.policy"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(
        out.contains("blocking  compute → cache     env:UPSTASH_REDIS_REST_URL  same region      eu-central-1"),
        "{out}"
    );
    // An async hop may cross regions: nothing waits for it.
    assert!(
        out.contains(
            "async     compute → assets    env:R2_URL                  crosses regions  eu-central-1 → us-east-1"
        ),
        "{out}"
    );
    assert_eq!(
        stderr(&output),
        "policy locality: 0 errors, 0 warnings in 3 hops\n"
    );
}

#[test]
fn check_warns_when_a_region_is_unknown() {
    let output = locality(&[
        "--check",
        "--env-file",
        "unknown-region.env",
        "service.policy",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let err = stderr(&output);
    assert_eq!(err.matches("policy::unknown-region").count(), 1, "{err}");
    assert!(
        err.contains("cannot tell whether blocking hop `cache` crosses regions"),
        "{err}"
    );
    assert!(
        err.contains("current Upstash hosts omit the region"),
        "{err}"
    );
    assert!(
        err.contains("help: `region: null` is an answer, not a failure"),
        "{err}"
    );
    assert!(
        err.contains("policy locality: 0 errors, 1 warning in 3 hops"),
        "{err}"
    );
    assert!(
        stdout(&output).contains("unknown      current Upstash hosts omit the region"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn check_warns_once_per_blocking_hop_when_the_compute_region_is_unknown() {
    let env = write(
        "laptop.env",
        "DATABASE_URL=postgres://app:pw@ep-quiet-fog-123456.eu-central-1.aws.neon.tech/app\n\
         R2_URL=https://0123456789abcdef.r2.cloudflarestorage.com\n",
    );
    let policy = write(
        "laptop.policy",
        "locality {\n    database = blocking env DATABASE_URL\n    assets = async env R2_URL\n}\n",
    );
    let output = locality(&["--check", "--env-file", &env, &policy]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let err = stderr(&output);
    assert_eq!(err.matches("policy::unknown-region").count(), 1, "{err}");
    assert!(err.contains("no platform variable"), "{err}");
    assert!(err.contains("the compute's region is unknown"), "{err}");
    assert!(
        stdout(&output).contains("unknown  compute: no platform variable"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn check_warns_when_the_service_is_in_another_cloud() {
    let env = write(
        "clouds.env",
        "VERCEL_REGION=fra1\nCACHE_URL=rediss://default:pw@gusc1-fine-gecko-31710.upstash.io:6379\n",
    );
    let policy = write(
        "clouds.policy",
        "locality { cache = blocking env CACHE_URL }\n",
    );
    let output = locality(&["--check", "--env-file", &env, &policy]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains(
            "cannot tell whether blocking hop `cache` crosses regions: the compute runs in `eu-central-1` (aws), the service in `us-central1` (gcp), and regions of two clouds are not compared"
        ),
        "{err}"
    );
    assert!(err.contains("in another cloud than the compute"), "{err}");
}

#[test]
fn json_is_the_probes_map_with_the_hops_added() {
    let output = locality(&[
        "--format",
        "json",
        "--env-file",
        "production.env",
        "service.policy",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let mut json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(json["files"], serde_json::json!(["service.policy"]));
    assert_eq!(
        json["hops"],
        serde_json::json!([
            {
                "name": "database",
                "kind": "blocking",
                "variable": "DATABASE_URL",
                "relation": "same",
                "region": "eu-central-1",
                "reason": null,
            },
            {
                "name": "cache",
                "kind": "blocking",
                "variable": "UPSTASH_REDIS_REST_URL",
                "relation": "different",
                "region": "us-east-1",
                "reason": null,
            },
            {
                "name": "assets",
                "kind": "async",
                "variable": "R2_URL",
                "relation": "unknown",
                "region": null,
                "reason": "R2 has no region",
            },
        ])
    );
    // No judgement without `--check`.
    assert!(json.get("diagnostics").is_none());

    // What remains is exactly the probe's own JSON: what a service's dashboard serves.
    let object = json.as_object_mut().unwrap();
    object.remove("files");
    object.remove("hops");
    let text = std::fs::read_to_string(fixture("production.env")).unwrap();
    let vars = text.lines().filter_map(|line| {
        let (name, value) = line.split_once('=')?;
        Some((name.to_owned(), value.trim_matches('"').to_owned()))
    });
    assert_eq!(
        json,
        serde_json::to_value(LocalityMap::from_vars(vars)).unwrap()
    );
}

#[test]
fn json_with_check_carries_the_diagnostics() {
    let output = locality(&[
        "--check",
        "--format",
        "json",
        "--env-file",
        "production.env",
        "service.policy",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(
        (json["errors"].as_u64(), json["warnings"].as_u64()),
        (Some(1), Some(0))
    );
    let diagnostic = &json["diagnostics"][0];
    assert_eq!(diagnostic["code"], "policy::cross-region-hop");
    assert_eq!(
        diagnostic["message"],
        "blocking hop `cache` crosses regions: the compute runs in `eu-central-1`, the service in `us-east-1`"
    );
    assert_eq!(diagnostic["severity"], "error");
    assert_eq!(
        (diagnostic["line"].as_u64(), diagnostic["column"].as_u64()),
        (Some(4), Some(13))
    );
    assert_eq!(
        diagnostic["labels"][1]["text"],
        "locates the service in `us-east-1`"
    );
}

#[test]
fn an_unset_variable_is_a_diagnostic_under_check() {
    let env = write(
        "partial.env",
        "VERCEL_REGION=fra1\n\
         DATABASE_URL=postgres://app:pw@ep-quiet-fog-123456.eu-central-1.aws.neon.tech/app\n\
         R2_URL=not a connection string\n",
    );
    let env = env.as_str();

    let shown = locality(&["--env-file", env, "service.policy"]);
    assert_eq!(shown.status.code(), Some(0), "{}", stderr(&shown));
    let out = stdout(&shown);
    assert!(
        out.contains("not located  UPSTASH_REDIS_REST_URL is not set"),
        "{out}"
    );
    assert!(
        out.contains("not located  R2_URL holds no connection string"),
        "{out}"
    );

    let checked = locality(&["--check", "--env-file", env, "service.policy"]);
    assert_eq!(checked.status.code(), Some(1));
    let err = stderr(&checked);
    assert_eq!(err.matches("policy::hop-not-located").count(), 2, "{err}");
    assert!(
        err.contains("hop `cache` cannot be located: `UPSTASH_REDIS_REST_URL` is not set"),
        "{err}"
    );
    assert!(
        err.contains("hop `assets` cannot be located: `R2_URL` holds no connection string the probe reads (its value is not shown)"),
        "{err}"
    );
    assert!(err.contains("help: set `UPSTASH_REDIS_REST_URL`"), "{err}");
    assert!(!err.contains("not a connection string"), "{err}");
}

#[test]
fn reads_the_process_environment_without_an_env_file() {
    let output = locality_with_env(
        &["--check", "service.policy"],
        &[
            ("FLY_REGION", "fra"),
            (
                "DATABASE_URL",
                "postgres://app:pw@orders.abc123.eu-central-1.rds.amazonaws.com/app",
            ),
            (
                "UPSTASH_REDIS_REST_URL",
                "https://eu2-fine-gecko-31710.upstash.io",
            ),
            (
                "R2_URL",
                "https://0123456789abcdef.r2.cloudflarestorage.com",
            ),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(
        out.starts_with("compute              eu-central-1  Fly.io"),
        "{out}"
    );
    assert!(
        out.contains("compute → database  env:DATABASE_URL"),
        "{out}"
    );
    assert_eq!(out.matches("same region").count(), 2, "{out}");
}

#[test]
fn bad_input_is_reported_never_a_panic() {
    // A missing environment file: exit 2.
    let missing = locality(&[
        "--env-file",
        "/nonexistent/production.env",
        "service.policy",
    ]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("cannot read `/nonexistent/production.env`"),
        "{}",
        stderr(&missing)
    );

    // A missing policy file: exit 2.
    let missing = locality(&["--env-file", "production.env", "/nonexistent/x.policy"]);
    assert_eq!(missing.status.code(), Some(2));

    // `--check` needs the policy that declares the hops.
    assert_eq!(locality(&["--check"]).status.code(), Some(2));

    // A malformed stanza: every problem, then no map.
    let malformed = locality(&[
        "--check",
        "--env-file",
        "production.env",
        "malformed.policy",
    ]);
    assert_eq!(malformed.status.code(), Some(1));
    assert!(stdout(&malformed).is_empty());
    let err = stderr(&malformed);
    assert_eq!(err.matches("policy::invalid-value").count(), 2, "{err}");
    assert!(
        err.contains(
            "help: write `env` before the variable: `database = blocking env DATABASE_URL`"
        ),
        "{err}"
    );
    assert!(err.contains("policy::unknown-hop-kind"), "{err}");
    assert!(err.contains("did you mean `blocking`?"), "{err}");
    assert!(
        err.contains("3 errors, 0 warnings; fix the errors first"),
        "{err}"
    );

    // A policy without a `locality` stanza has nothing to check.
    let policy = write("no-stanza.policy", "request { deadline = 10s }\n");
    let policy = policy.as_str();
    let nothing = locality(&["--check", "--env-file", "production.env", policy]);
    assert_eq!(nothing.status.code(), Some(1));
    assert!(
        stderr(&nothing).contains("the policy declares no hops to check"),
        "{}",
        stderr(&nothing)
    );
    let shown = locality(&["--env-file", "production.env", policy]);
    assert_eq!(shown.status.code(), Some(0));
    assert!(stdout(&shown).contains("(no hops: the policy has no `locality` stanza)"));
}

#[test]
fn unreadable_env_file_lines_are_skipped_by_number_only() {
    let env = write(
        "pasted.env",
        "VERCEL_REGION=fra1\n\
         postgres://app:Pasted9Secret@db.internal.example.com/app\n\
         DATABASE_URL=postgres://app:pw@ep-quiet-fog-123456.eu-central-1.aws.neon.tech/app\n",
    );
    let output = locality(&["--env-file", &env]);
    assert_eq!(output.status.code(), Some(0));
    let err = stderr(&output);
    assert!(
        err.contains("warning: line 2 of `")
            && err.contains("pasted.env` is not `NAME=VALUE`; skipped"),
        "{err}"
    );
    for secret in ["Pasted9Secret", "db.internal.example.com", "postgres://"] {
        assert!(!err.contains(secret) && !stdout(&output).contains(secret));
    }
}
