//! The locality probe never shows a credential or a host.
//!
//! For generated connection strings with user names, passwords, tokens in
//! query strings and hosts (from provider templates and random), no output of
//! any kind contains the password, the token, the user or the host: not the
//! printed map, not its JSON, not the `Debug` form of any type, not an error
//! message.
#![cfg(feature = "locality")]

use proptest::prelude::*;
use velocity_policy_delivery::locality::{ComputeSite, LocalityMap, Region, ServiceSite};

/// A secret: starts upper-case and holds a digit, so that, at 10 characters or
/// more, no word, region code or variable name in the output can equal it by chance.
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

/// A host and the label that makes it unique (which must not show either).
fn host() -> impl Strategy<Value = (String, String)> {
    let unique = "[a-z]{6,10}[0-9]{3,6}";
    let aws = prop::sample::select(vec![
        "eu-central-1",
        "us-east-1",
        "ap-southeast-2",
        "sa-east-1",
    ]);
    let short = prop::sample::select(vec!["euc1", "use1", "apse2", "zzz9"]);
    let upstash = prop::sample::select(vec!["eu1-", "us1-", "gusc1-", "fly-", "zz7-", ""]);
    let slug = prop::sample::select(vec![
        "aws",
        "aws-eu-west-2",
        "eu-central",
        "gcp-us-central1",
        "mars",
    ]);
    let tld = prop::sample::select(vec!["com", "net", "io", "dev", "example"]);
    prop_oneof![
        (unique, aws.clone()).prop_map(|(u, r)| (format!("ep-{u}-pooler.{r}.aws.neon.tech"), u)),
        (unique, aws.clone()).prop_map(|(u, r)| (format!("ep-{u}.c-2.{r}.aws.neon.tech"), u)),
        (unique, aws.clone())
            .prop_map(|(u, r)| (format!("{u}.{r}.postgres.vercel-storage.com"), u)),
        (unique, aws.clone()).prop_map(|(u, r)| (format!("aws-0-{r}.pooler.supabase.com"), u)),
        unique.prop_map(|u| (format!("db.{u}.supabase.co"), u)),
        (unique, aws.clone()).prop_map(|(u, r)| (format!("orders.{u}.{r}.rds.amazonaws.com"), u)),
        (unique, aws.clone())
            .prop_map(|(u, r)| (format!("app.cluster-ro-{u}.{r}.rds.amazonaws.com"), u)),
        (unique, short)
            .prop_map(|(u, s)| (format!("sessions.{u}.0001.{s}.cache.amazonaws.com"), u)),
        (unique, upstash).prop_map(|(u, p)| (format!("{p}{u}.upstash.io"), u)),
        (unique, slug).prop_map(|(u, s)| (format!("{s}.connect.psdb.cloud"), u)),
        unique.prop_map(|u| (format!("{u}.r2.cloudflarestorage.com"), u)),
        unique.prop_map(|u| (format!("{u}.databases.neo4j.io"), u)),
        (unique, tld.clone()).prop_map(|(u, t)| (format!("{u}.{t}"), u)),
        (unique, "[a-z]{3,8}", tld).prop_map(|(u, mid, t)| (format!("{mid}.{u}.{t}"), u)),
    ]
}

/// The schemes the probe knows, and one it knows only behind `jdbc:`.
fn scheme() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "postgres",
        "postgresql",
        "mysql",
        "redis",
        "rediss",
        "https",
        "mongodb+srv",
        "neo4j+s",
        "jdbc:postgresql",
    ])
}

/// One generated connection string, with what must never show.
#[derive(Debug, Clone)]
struct Generated {
    value: String,
    forbidden: Vec<String>,
    /// Whether the probe must report it (it has a known scheme).
    reported: bool,
}

fn connection_string() -> impl Strategy<Value = Generated> {
    let query = prop::sample::select(vec![
        "token",
        "password",
        "apikey",
        "access_token",
        "sslpassword",
    ]);
    (
        scheme(),
        secret(),
        password(),
        host(),
        query,
        secret(),
        0_u8..8,
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
                    5 => format!("  {scheme}://{user}:{password}@{host}?{param}={token}  "),
                    // Not a connection string at all: never reported, never echoed.
                    6 => format!("{user}:{password}@{host}/{token}"),
                    _ => format!("{scheme}://{user}:{password}@{host} {token}"),
                };
                Generated {
                    value,
                    forbidden: vec![password, token, user, host, unique],
                    reported: shape != 6,
                }
            },
        )
}

/// Every rendering a user or a log could ever see.
#[expect(
    clippy::unwrap_used,
    reason = "serializing these types cannot fail; if it did, the test should stop"
)]
fn renderings(map: &LocalityMap, value: &str) -> Vec<String> {
    let mut out = vec![
        map.to_string(),
        format!("{map:?}"),
        format!("{map:#?}"),
        serde_json::to_string(map).unwrap(),
        serde_json::to_string_pretty(map).unwrap(),
    ];
    if let Some(compute) = map.compute() {
        out.push(format!("{compute:?}"));
        out.push(serde_json::to_string(compute).unwrap());
        out.extend(compute.code().map(str::to_owned));
        out.extend(compute.reason().map(str::to_owned));
    }
    for site in map.services() {
        out.push(format!("{site:?}"));
        out.push(serde_json::to_string(site).unwrap());
        out.push(format!(
            "{} {} {:?} {:?}",
            site.provider(),
            site.kind(),
            site.provider(),
            site.kind()
        ));
        out.extend(site.region().map(|r| format!("{r} {r:?}")));
        out.extend(site.reason().map(str::to_owned));
    }
    for hop in map.hops() {
        out.push(format!("{hop:?}"));
        out.push(serde_json::to_string(&hop).unwrap());
    }
    if let Some(site) = ServiceSite::from_var("VAR", value) {
        out.push(format!("{site:?}"));
    }
    for attempt in [value, value.trim()] {
        if let Err(error) = Region::parse(attempt) {
            out.push(error.to_string());
            out.push(format!("{error:?}"));
        }
    }
    out
}

fn assert_hidden(outputs: &[String], forbidden: &[String]) -> Result<(), TestCaseError> {
    for output in outputs {
        for secret in forbidden {
            prop_assert!(
                !output.contains(secret.as_str()),
                "`{secret}` shown in:\n{output}"
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn no_output_shows_a_credential_or_a_host(generated in connection_string()) {
        let map = LocalityMap::from_vars([
            ("VERCEL_REGION", "fra1"),
            ("DATABASE_URL", generated.value.as_str()),
        ]);
        prop_assert_eq!(map.service("DATABASE_URL").is_some(), generated.reported);
        assert_hidden(&renderings(&map, &generated.value), &generated.forbidden)?;
    }

    #[test]
    fn many_variables_at_once(values in prop::collection::vec(connection_string(), 1..6)) {
        let vars: Vec<(String, String)> = values
            .iter()
            .enumerate()
            .map(|(i, g)| (format!("SERVICE_{i}_URL"), g.value.clone()))
            .collect();
        let map = LocalityMap::from_vars(vars);
        let forbidden: Vec<String> = values.iter().flat_map(|g| g.forbidden.clone()).collect();
        let outputs: Vec<String> = values.iter().flat_map(|g| renderings(&map, &g.value)).collect();
        assert_hidden(&outputs, &forbidden)?;
    }

    /// Platform variables holding anything at all are not echoed either.
    #[test]
    fn platform_variables_are_not_echoed(generated in connection_string(), which in 0_u8..4) {
        let value = generated.value.as_str();
        let vars: Vec<(&str, &str)> = match which {
            0 => vec![("VERCEL_REGION", value)],
            1 => vec![("FLY_REGION", value)],
            2 => vec![("AWS_LAMBDA_FUNCTION_NAME", "api"), ("AWS_REGION", value)],
            _ => vec![("AWS_EXECUTION_ENV", "AWS_ECS_FARGATE"), ("AWS_DEFAULT_REGION", value)],
        };
        let map = LocalityMap::from_vars(vars.iter().copied());
        let compute = ComputeSite::from_vars(vars.iter().copied());
        prop_assert!(compute.is_some());
        prop_assert_eq!(compute.as_ref().and_then(ComputeSite::code), None);
        let mut outputs = renderings(&map, value);
        outputs.push(format!("{compute:?}"));
        assert_hidden(&outputs, &generated.forbidden)?;
    }
}

/// The templates above really do reach the provider rules: a guard against a
/// property test that passes because nothing was recognised.
#[test]
fn templates_are_recognised() {
    let site = ServiceSite::from_var(
        "VAR",
        "postgres://Uabcdef1xyz:Pabcdef1xyz@ep-quietfog123.eu-central-1.aws.neon.tech/app?token=Tabcdef1xyz",
    )
    .unwrap();
    assert_eq!(site.region().map(Region::code), Some("eu-central-1"));
}
