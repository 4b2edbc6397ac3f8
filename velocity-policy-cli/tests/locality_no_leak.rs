//! `policy locality` never shows a credential, a host, or any part of a variable's value other
//! than a derived region code.
//!
//! Generated connection strings with user names, passwords, tokens in query strings and hosts
//! (from provider templates and random), platform variables holding junk, and environment-file
//! lines that cannot be read, go through the built binary: as a table and as JSON, with and
//! without `--check`, from an environment file and from the process environment. Neither
//! standard output nor standard error may contain any of them.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a failure should stop the test"
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;

/// A secret: starts upper-case and holds a digit, so that, at 10 characters or more, no word,
/// region code, variable name or path in the output can equal it by chance.
fn secret() -> impl Strategy<Value = String> {
    "[A-Z][a-z0-9]{6}[0-9][A-Za-z0-9]{2,16}"
}

/// A password: a secret, sometimes with the characters people paste unescaped.
fn password() -> impl Strategy<Value = String> {
    (
        secret(),
        prop::sample::select(vec!["", "/", "#", "?", "@", ":", "%", "!", "$", "&", "/@#"]),
        secret(),
    )
        .prop_map(|(a, special, b)| {
            if special.is_empty() {
                a
            } else {
                format!("{a}{special}{b}")
            }
        })
}

/// A host, and the label that makes it unique (which must not show either).
fn host() -> impl Strategy<Value = (String, String)> {
    let unique = "[a-z]{6,10}[0-9]{3,6}";
    let region = prop::sample::select(vec!["eu-central-1", "us-east-1", "ap-southeast-2"]);
    let upstash = prop::sample::select(vec!["eu1-", "us1-", "eu2-", "gusc1-", "fly-", ""]);
    let tld = prop::sample::select(vec!["com", "net", "io", "dev", "example"]);
    prop_oneof![
        (unique, region.clone()).prop_map(|(u, r)| (format!("ep-{u}-pooler.{r}.aws.neon.tech"), u)),
        (unique, region.clone())
            .prop_map(|(u, r)| (format!("orders.{u}.{r}.rds.amazonaws.com"), u)),
        (unique, upstash).prop_map(|(u, p)| (format!("{p}{u}.upstash.io"), u)),
        unique.prop_map(|u| (format!("{u}.r2.cloudflarestorage.com"), u)),
        unique.prop_map(|u| (format!("db.{u}.supabase.co"), u)),
        (unique, tld).prop_map(|(u, t)| (format!("{u}.{t}"), u)),
    ]
}

fn scheme() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "postgres",
        "postgresql",
        "mysql",
        "rediss",
        "https",
        "mongodb+srv",
        "jdbc:postgresql",
    ])
}

/// One generated value, and what must never show.
#[derive(Debug, Clone)]
struct Generated {
    value: String,
    forbidden: Vec<String>,
}

fn connection_string() -> impl Strategy<Value = Generated> {
    let param = prop::sample::select(vec!["token", "password", "apikey", "sslpassword"]);
    (
        scheme(),
        secret(),
        password(),
        host(),
        param,
        secret(),
        0_u8..7,
        1_u16..65535,
    )
        .prop_map(
            |(scheme, user, password, (host, unique), param, token, shape, port)| {
                let value = match shape {
                    0 => format!("{scheme}://{user}:{password}@{host}:{port}/app?{param}={token}"),
                    1 => format!(
                        "{scheme}://{user}:{password}@{host}/app?sslmode=require&{param}={token}"
                    ),
                    2 => format!("{scheme}://{host}/app?user={user}&{param}={token}&x={password}"),
                    3 => format!(
                        "{scheme}://{user}:{password}@tcp({host}:{port})/app?{param}={token}"
                    ),
                    4 => format!(
                        "{scheme}://{user}:{password}@{host}:{port},{host}:{port}/app#{token}"
                    ),
                    // Not a connection string: never reported, never echoed.
                    5 => format!("{user}:{password}@{host}/{token}"),
                    _ => format!("{scheme}://{user}:{password}@{host}"),
                };
                Generated {
                    value,
                    forbidden: vec![password, token, user, host, unique],
                }
            },
        )
}

/// A whole environment: the variables the policy's hops name, a platform variable that may
/// hold junk, and lines an environment file cannot read.
#[derive(Debug, Clone)]
struct Environment {
    vars: Vec<(String, String)>,
    /// Lines written to the environment file as they are: never `NAME=VALUE`.
    junk_lines: Vec<String>,
    /// Whether each value is written in double quotes in the environment file.
    quoted: Vec<bool>,
    forbidden: Vec<String>,
}

fn environment() -> impl Strategy<Value = Environment> {
    (
        prop::collection::vec(connection_string(), 4),
        prop::collection::vec(any::<bool>(), 5),
        secret(),
        0_u8..4,
        connection_string(),
        secret(),
    )
        .prop_map(
            |(values, quoted, platform_secret, platform, pasted, bad_name)| {
                let (platform_var, platform_value) = match platform {
                    0 => ("VERCEL_REGION", "fra1".to_owned()),
                    1 => ("VERCEL_REGION", format!("fra1-{platform_secret}")),
                    2 => ("FLY_REGION", platform_secret.clone()),
                    _ => ("AWS_REGION", platform_secret.clone()),
                };
                let mut vars = vec![(platform_var.to_owned(), platform_value)];
                for (name, generated) in ["DATABASE_URL", "CACHE_URL", "ASSETS_URL", "NOT_A_URL"]
                    .iter()
                    .zip(&values)
                {
                    vars.push(((*name).to_owned(), generated.value.clone()));
                }
                let mut forbidden: Vec<String> =
                    values.iter().flat_map(|g| g.forbidden.clone()).collect();
                forbidden.push(platform_secret);
                forbidden.extend(pasted.forbidden.clone());
                forbidden.push(bad_name.clone());
                Environment {
                    vars,
                    junk_lines: vec![pasted.value, format!("{bad_name} NAME=value")],
                    quoted,
                    forbidden,
                }
            },
        )
}

const POLICY: &str = "\
locality {
    database = blocking env DATABASE_URL
    cache = blocking env CACHE_URL
    assets = async env ASSETS_URL
    junk = blocking env NOT_A_URL
    missing = blocking env MISSING_URL
}
";

static CASE: AtomicUsize = AtomicUsize::new(0);

/// A fresh directory holding `service.policy` and `production.env` for one case.
fn case_dir(environment: &Environment) -> PathBuf {
    let case = CASE.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "policy-locality-no-leak-{}-{case}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("service.policy"), POLICY).unwrap();
    let mut text = String::from("# generated\n");
    for (i, (name, value)) in environment.vars.iter().enumerate() {
        if environment.quoted.get(i).copied().unwrap_or(false) {
            text.push_str(&format!("export {name}=\"{value}\"\n"));
        } else {
            text.push_str(&format!("{name}={value}\n"));
        }
        if let Some(junk) = environment.junk_lines.get(i) {
            text.push_str(junk);
            text.push('\n');
        }
    }
    std::fs::write(dir.join("production.env"), text).unwrap();
    dir
}

/// Runs `policy locality ARGS` in `dir` with only `env` as its process environment; returns
/// standard output and standard error together, and the exit code.
fn run(dir: &Path, args: &[&str], env: &[(String, String)]) -> (String, Option<i32>) {
    let output = Command::new(env!("CARGO_BIN_EXE_policy"))
        .arg("locality")
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("NO_COLOR", "1")
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()
        .unwrap();
    let mut text = String::from_utf8(output.stdout).unwrap();
    text.push_str(&String::from_utf8(output.stderr).unwrap());
    (text, output.status.code())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn no_output_shows_a_credential_or_a_host(environment in environment()) {
        let dir = case_dir(&environment);
        let runs: [(&[&str], bool); 6] = [
            (&["--env-file", "production.env", "service.policy"], false),
            (&["--check", "--env-file", "production.env", "service.policy"], false),
            (&["--format", "json", "--env-file", "production.env", "service.policy"], false),
            (&["--check", "--format", "json", "--env-file", "production.env", "service.policy"], false),
            (&["--check", "service.policy"], true),
            (&["--format", "json", "service.policy"], true),
        ];
        for (args, from_process) in runs {
            let env: &[(String, String)] = if from_process { &environment.vars } else { &[] };
            let (output, code) = run(&dir, args, env);
            // Never a panic or a usage error: the hops were judged and printed.
            prop_assert!(matches!(code, Some(0 | 1)), "exit {code:?} for {args:?}:\n{output}");
            prop_assert!(output.contains("database"), "{args:?}:\n{output}");
            for secret in &environment.forbidden {
                prop_assert!(
                    !output.contains(secret.as_str()),
                    "`{secret}` shown by `policy locality {}`:\n{output}",
                    args.join(" ")
                );
            }
        }
        // The junk hop always fails the check; the file's unreadable lines are reported.
        let (checked, code) = run(&dir, &["--check", "--env-file", "production.env", "service.policy"], &[]);
        prop_assert_eq!(code, Some(1));
        prop_assert!(checked.contains("hop `missing` cannot be located"), "{}", checked);
        prop_assert!(checked.contains("is not `NAME=VALUE`; skipped"), "{}", checked);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The templates above do reach the probe's provider rules through the binary: a guard against
/// a property that holds because nothing was recognised.
#[test]
fn templates_are_recognised() {
    let environment = Environment {
        vars: vec![
            ("VERCEL_REGION".to_owned(), "fra1".to_owned()),
            (
                "DATABASE_URL".to_owned(),
                "postgres://Uabcdef1xyz:Pabcdef1xyz@ep-quietfog123-pooler.eu-central-1.aws.neon.tech/app?token=Tabcdef1xyz".to_owned(),
            ),
        ],
        junk_lines: Vec::new(),
        quoted: vec![false, true],
        forbidden: Vec::new(),
    };
    let dir = case_dir(&environment);
    let (output, code) = run(
        &dir,
        &["--env-file", "production.env", "service.policy"],
        &[],
    );
    assert_eq!(code, Some(0), "{output}");
    assert!(
        output
            .contains("blocking  compute → database  env:DATABASE_URL  same region  eu-central-1"),
        "{output}"
    );
    for secret in ["Uabcdef1xyz", "Pabcdef1xyz", "Tabcdef1xyz", "quietfog123"] {
        assert!(!output.contains(secret), "{output}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
