//! Table tests for the locality probe: every provider's host forms, with
//! synthetic host names, including the ones that give `region: null`.
#![cfg(feature = "locality")]

use velocity_policy_delivery::locality::{
    Cloud, ComputeSite, LocalityMap, Platform, Provider, Region, RegionMatch, ServiceKind,
    ServiceSite,
};

/// What one connection string should be reported as.
struct Case {
    value: &'static str,
    provider: Provider,
    kind: ServiceKind,
    /// `Ok(region)` or `Err(words the reason must contain)`.
    region: Result<&'static str, &'static str>,
}

const fn case(
    value: &'static str,
    provider: Provider,
    kind: ServiceKind,
    region: Result<&'static str, &'static str>,
) -> Case {
    Case {
        value,
        provider,
        kind,
        region,
    }
}

#[expect(clippy::panic, reason = "a table test names the failing case")]
fn check(cases: &[Case]) {
    for (i, c) in cases.iter().enumerate() {
        let site = ServiceSite::from_var("VAR", c.value)
            .unwrap_or_else(|| panic!("case {i}: `{}` was not recognised", c.value));
        assert_eq!(
            site.provider(),
            c.provider,
            "case {i}: provider of `{}`",
            c.value
        );
        assert_eq!(site.kind(), c.kind, "case {i}: kind of `{}`", c.value);
        match c.region {
            Ok(region) => {
                assert_eq!(
                    site.region().map(Region::code),
                    Some(region),
                    "case {i}: `{}`",
                    c.value
                );
                assert_eq!(site.reason(), None, "case {i}: `{}`", c.value);
            }
            Err(words) => {
                assert_eq!(site.region(), None, "case {i}: `{}`", c.value);
                let reason = site
                    .reason()
                    .unwrap_or_else(|| panic!("case {i}: no reason for `{}`", c.value));
                assert!(
                    reason.contains(words),
                    "case {i}: reason `{reason}` for `{}`",
                    c.value
                );
            }
        }
    }
}

use Provider as P;
use ServiceKind as K;

#[test]
fn neon() {
    check(&[
        case(
            "postgres://app:pw@ep-quiet-fog-123456.eu-central-1.aws.neon.tech/app?sslmode=require",
            P::Neon,
            K::RelationalDatabase,
            Ok("eu-central-1"),
        ),
        case(
            "postgresql://app:pw@ep-quiet-fog-123456-pooler.us-east-2.aws.neon.tech/app",
            P::Neon,
            K::RelationalDatabase,
            Ok("us-east-2"),
        ),
        // Newer hosts put a cell label before the region.
        case(
            "postgresql://app:pw@ep-quiet-fog-a1b2c3d4-pooler.c-2.us-east-1.aws.neon.tech/app",
            P::Neon,
            K::RelationalDatabase,
            Ok("us-east-1"),
        ),
        case(
            "postgresql://app:pw@ep-quiet-fog-a1b2c3d4.eastus2.azure.neon.tech/app",
            P::Neon,
            K::RelationalDatabase,
            Ok("eastus2"),
        ),
        case(
            "postgresql://app:pw@ep-quiet-fog-a1b2c3d4-pooler.gwc.azure.neon.tech/app",
            P::Neon,
            K::RelationalDatabase,
            Ok("germanywestcentral"),
        ),
        // The serverless driver's HTTP endpoint is still the database.
        case(
            "https://ep-quiet-fog-123456.eu-central-1.aws.neon.tech/sql",
            P::Neon,
            K::RelationalDatabase,
            Ok("eu-central-1"),
        ),
        case(
            "postgres://app:pw@ep-quiet-fog-123456.cloud.neon.tech/app",
            P::Neon,
            K::RelationalDatabase,
            Err("no region label"),
        ),
        case(
            "postgres://app:pw@ep-quiet-fog-123456.atlantis.azure.neon.tech/app",
            P::Neon,
            K::RelationalDatabase,
            Err("Neon Azure location"),
        ),
        case(
            "postgres://default:pw@ep-quiet-fog-123456-pooler.us-east-1.postgres.vercel-storage.com/verceldb",
            P::VercelPostgres,
            K::RelationalDatabase,
            Ok("us-east-1"),
        ),
    ]);
}

#[test]
fn supabase() {
    check(&[
        case(
            "postgresql://postgres.abcdefghijklmnop:pw@aws-0-eu-central-1.pooler.supabase.com:6543/postgres",
            P::Supabase,
            K::RelationalDatabase,
            Ok("eu-central-1"),
        ),
        case(
            "postgresql://postgres.abcdefghijklmnop:pw@aws-1-ap-south-1.pooler.supabase.com:5432/postgres",
            P::Supabase,
            K::RelationalDatabase,
            Ok("ap-south-1"),
        ),
        case(
            "postgresql://postgres:pw@db.abcdefghijklmnop.supabase.co:5432/postgres",
            P::Supabase,
            K::RelationalDatabase,
            Err("name the project, not its region"),
        ),
        case(
            "https://abcdefghijklmnop.supabase.co",
            P::Supabase,
            K::HttpApi,
            Err("name the project, not its region"),
        ),
        case(
            "postgresql://postgres.abcdefghijklmnop:pw@elsewhere-0-fra.pooler.supabase.com:6543/postgres",
            P::Supabase,
            K::RelationalDatabase,
            Err("Supabase pooler"),
        ),
    ]);
}

#[test]
fn rds_and_aurora() {
    check(&[
        case(
            "postgres://app:pw@orders.c9akciq32abc.eu-west-1.rds.amazonaws.com:5432/app",
            P::AwsRds,
            K::RelationalDatabase,
            Ok("eu-west-1"),
        ),
        case(
            "mysql://app:pw@orders.c9akciq32abc.ap-southeast-2.rds.amazonaws.com:3306/app",
            P::AwsRds,
            K::RelationalDatabase,
            Ok("ap-southeast-2"),
        ),
        case(
            "postgres://app:pw@orders.proxy-c9akciq32abc.us-east-1.rds.amazonaws.com/app",
            P::AwsRds,
            K::RelationalDatabase,
            Ok("us-east-1"),
        ),
        case(
            "postgres://app:pw@orders.cluster-c9akciq32abc.us-east-2.rds.amazonaws.com/app",
            P::AwsAurora,
            K::RelationalDatabase,
            Ok("us-east-2"),
        ),
        case(
            "postgres://app:pw@orders.cluster-ro-c9akciq32abc.eu-central-1.rds.amazonaws.com/app",
            P::AwsAurora,
            K::RelationalDatabase,
            Ok("eu-central-1"),
        ),
        case(
            "mysql://app:pw@reports.cluster-custom-c9akciq32abc.us-west-2.rds.amazonaws.com/app",
            P::AwsAurora,
            K::RelationalDatabase,
            Ok("us-west-2"),
        ),
        case(
            "jdbc:postgresql://orders.c9akciq32abc.cn-north-1.rds.amazonaws.com.cn:5432/app",
            P::AwsRds,
            K::RelationalDatabase,
            Ok("cn-north-1"),
        ),
        case(
            "postgres://app:pw@orders.c9akciq32abc.moon-base-1.rds.amazonaws.com/app",
            P::AwsRds,
            K::RelationalDatabase,
            Err("no region label"),
        ),
    ]);
}

#[test]
fn elasticache() {
    check(&[
        case(
            "redis://sessions.abc123.0001.euc1.cache.amazonaws.com:6379",
            P::AwsElastiCache,
            K::Cache,
            Ok("eu-central-1"),
        ),
        case(
            "rediss://:pw@sessions.abc123.ng.0001.use1.cache.amazonaws.com:6379",
            P::AwsElastiCache,
            K::Cache,
            Ok("us-east-1"),
        ),
        case(
            "redis://clustercfg.sessions.abc123.apse2.cache.amazonaws.com:6379",
            P::AwsElastiCache,
            K::Cache,
            Ok("ap-southeast-2"),
        ),
        case(
            "rediss://sessions-abc123.serverless.usw2.cache.amazonaws.com:6379",
            P::AwsElastiCache,
            K::Cache,
            Ok("us-west-2"),
        ),
        case(
            "valkeys://sessions-abc123.serverless.eun1.cache.amazonaws.com:6379",
            P::AwsElastiCache,
            K::Cache,
            Ok("eu-north-1"),
        ),
        case(
            "redis://sessions.abc123.0001.usgw1.cache.amazonaws.com:6379",
            P::AwsElastiCache,
            K::Cache,
            Ok("us-gov-west-1"),
        ),
        case(
            "redis://sessions.abc123.0001.cnw1.cache.amazonaws.com.cn:6379",
            P::AwsElastiCache,
            K::Cache,
            Ok("cn-northwest-1"),
        ),
        // Hosts with the full region in place of the short code.
        case(
            "redis://sessions.abc123.us-east-1.cache.amazonaws.com:6379",
            P::AwsElastiCache,
            K::Cache,
            Ok("us-east-1"),
        ),
        case(
            "memcached://sessions.abc123.cfg.xyz9.cache.amazonaws.com:11211",
            P::AwsElastiCache,
            K::Cache,
            Err("ElastiCache region code"),
        ),
    ]);
}

#[test]
fn upstash() {
    check(&[
        case(
            "rediss://default:pw@eu1-fine-gecko-31710.upstash.io:31710",
            P::Upstash,
            K::Cache,
            Ok("eu-west-1"),
        ),
        case(
            "rediss://default:pw@eu2-fine-gecko-31710.upstash.io:31710",
            P::Upstash,
            K::Cache,
            Ok("eu-central-1"),
        ),
        case(
            "redis://default:pw@us1-fine-gecko-31710.upstash.io:31710",
            P::Upstash,
            K::Cache,
            Ok("us-east-1"),
        ),
        case(
            "redis://default:pw@usw1-fine-gecko-31710.upstash.io:31710",
            P::Upstash,
            K::Cache,
            Ok("us-west-1"),
        ),
        case(
            "redis://default:pw@apn1-fine-gecko-31710.upstash.io:31710",
            P::Upstash,
            K::Cache,
            Ok("ap-northeast-1"),
        ),
        case(
            "rediss://default:pw@gusc1-fine-gecko-31710.upstash.io:31710",
            P::Upstash,
            K::Cache,
            Ok("us-central1"),
        ),
        case(
            "https://eu1-fine-gecko-31710.upstash.io",
            P::Upstash,
            K::Cache,
            Ok("eu-west-1"),
        ),
        case(
            "rediss://default:pw@fine-gecko-31710.upstash.io:6379",
            P::Upstash,
            K::Cache,
            Err("current Upstash hosts omit the region"),
        ),
        case(
            "https://fine-gecko-31710.upstash.io",
            P::Upstash,
            K::Cache,
            Err("current Upstash hosts omit the region"),
        ),
        case(
            "rediss://default:pw@zz9-fine-gecko-31710.upstash.io:6379",
            P::Upstash,
            K::Cache,
            Err("Upstash region prefix"),
        ),
        case(
            "redis://default:pw@fly-fine-gecko-31710.upstash.io:6379",
            P::Upstash,
            K::Cache,
            Err("Fly"),
        ),
    ]);
}

#[test]
fn planetscale() {
    check(&[
        case(
            "mysql://abcdefghij:pscale_pw_x@aws.connect.psdb.cloud/app?sslaccept=strict",
            P::PlanetScale,
            K::RelationalDatabase,
            Err("global host"),
        ),
        case(
            "mysql://abcdefghij:pscale_pw_x@gcp.connect.psdb.cloud/app",
            P::PlanetScale,
            K::RelationalDatabase,
            Err("global host"),
        ),
        case(
            "https://aws.connect.psdb.cloud",
            P::PlanetScale,
            K::RelationalDatabase,
            Err("global host"),
        ),
        case(
            "mysql://abcdefghij:pscale_pw_x@aws-eu-west-2.connect.psdb.cloud/app",
            P::PlanetScale,
            K::RelationalDatabase,
            Ok("eu-west-2"),
        ),
        case(
            "mysql://abcdefghij:pscale_pw_x@gcp-us-central1.connect.psdb.cloud/app",
            P::PlanetScale,
            K::RelationalDatabase,
            Ok("us-central1"),
        ),
        case(
            "mysql://abcdefghij:pscale_pw_x@eu-central.connect.psdb.cloud/app",
            P::PlanetScale,
            K::RelationalDatabase,
            Ok("eu-central-1"),
        ),
        case(
            "mysql://abcdefghij:pscale_pw_x@us-west.connect.psdb.cloud/app",
            P::PlanetScale,
            K::RelationalDatabase,
            Ok("us-west-2"),
        ),
        // Postgres hosts number a cell after the slug: `eu-central-2` is cell 2
        // of Frankfurt, not Zurich.
        case(
            "postgresql://postgres.abcdefghijkl:pscale_pw_x@eu-central-2.pg.psdb.cloud:6432/postgres",
            P::PlanetScale,
            K::RelationalDatabase,
            Ok("eu-central-1"),
        ),
        case(
            "postgresql://postgres.abcdefghijkl:pscale_pw_x@aws-us-east-1-3.pg.psdb.cloud:5432/postgres",
            P::PlanetScale,
            K::RelationalDatabase,
            Ok("us-east-1"),
        ),
        case(
            "mysql://abcdefghij:pw@abcdefghijkl.us-east-2.psdb.cloud/app",
            P::PlanetScale,
            K::RelationalDatabase,
            Ok("us-east-2"),
        ),
        case(
            "mysql://abcdefghij:pw@atlantis.connect.psdb.cloud/app",
            P::PlanetScale,
            K::RelationalDatabase,
            Err("slug not recognised"),
        ),
    ]);
}

#[test]
fn cloudflare_r2() {
    check(&[
        case(
            "https://0123456789abcdef0123456789abcdef.r2.cloudflarestorage.com",
            P::CloudflareR2,
            K::ObjectStorage,
            Err("R2 has no region"),
        ),
        case(
            "https://0123456789abcdef0123456789abcdef.eu.r2.cloudflarestorage.com/assets",
            P::CloudflareR2,
            K::ObjectStorage,
            Err("jurisdiction"),
        ),
    ]);
}

#[test]
fn plain_and_local_hosts() {
    check(&[
        case(
            "postgres://app:pw@db.example.com:5432/app",
            P::Unknown,
            K::RelationalDatabase,
            Err("plain host: region not derivable"),
        ),
        case(
            "https://api.example.com/v1",
            P::Unknown,
            K::HttpApi,
            Err("plain host: region not derivable"),
        ),
        case(
            "mysql://app:pw@db/app",
            P::Unknown,
            K::RelationalDatabase,
            Err("plain host"),
        ),
        case(
            "redis://10.0.0.5:6379",
            P::Unknown,
            K::Cache,
            Err("IP address"),
        ),
        case(
            "postgres://app@localhost/app",
            P::Local,
            K::RelationalDatabase,
            Err("local"),
        ),
        case("redis://127.0.0.1:6379/0", P::Local, K::Cache, Err("local")),
        case(
            "postgres:///app?host=/var/run/postgresql",
            P::Local,
            K::RelationalDatabase,
            Err("local"),
        ),
        case("http://[::1]:8080", P::Local, K::HttpApi, Err("local")),
    ]);
}

#[test]
fn other_providers() {
    check(&[
        case(
            "neo4j+s://abcd1234.databases.neo4j.io",
            P::Neo4jAura,
            K::GraphDatabase,
            Err("Neo4j Aura"),
        ),
        case(
            "mongodb+srv://app:pw@cluster0.abcde.mongodb.net/app?retryWrites=true",
            P::MongoDbAtlas,
            K::DocumentDatabase,
            Err("Atlas"),
        ),
        case(
            "https://assets.s3.eu-west-1.amazonaws.com",
            P::Aws,
            K::ObjectStorage,
            Ok("eu-west-1"),
        ),
        case(
            "https://assets.s3-eu-west-1.amazonaws.com/key",
            P::Aws,
            K::ObjectStorage,
            Ok("eu-west-1"),
        ),
        case(
            "https://assets.s3.amazonaws.com",
            P::Aws,
            K::ObjectStorage,
            Err("global endpoint"),
        ),
        case(
            "https://abc123.execute-api.us-east-1.amazonaws.com/prod",
            P::Aws,
            K::HttpApi,
            Ok("us-east-1"),
        ),
    ]);
}

#[test]
fn awkward_connection_strings() {
    let rds = "orders.c9akciq32abc.eu-west-1.rds.amazonaws.com";
    for value in [
        format!("postgres://app:pa/ss@{rds}/app"),
        format!("postgres://app:pa#ss@{rds}/app"),
        format!("postgres://app:pa@ss@{rds}/app"),
        format!("postgres://app:pa?ss@{rds}/app"),
        format!("  postgres://app:pw@{rds}/app  "),
        format!("POSTGRES://app:pw@{}/app", rds.to_uppercase()),
        format!("mysql://app:pw@tcp({rds}:3306)/app"),
        format!("postgresql://app:pw@{rds}:5432,{rds}:5433/app"),
    ] {
        let site = ServiceSite::from_var("VAR", &value).unwrap_or_else(|| panic!("`{value}`"));
        assert_eq!(site.provider(), P::AwsRds, "`{value}`");
        assert_eq!(
            site.region().map(Region::code),
            Some("eu-west-1"),
            "`{value}`"
        );
    }
}

#[test]
fn several_hosts_that_disagree() {
    check(&[
        case(
            "postgresql://app:pw@a.abc.eu-west-1.rds.amazonaws.com,b.abc.us-east-1.rds.amazonaws.com/app",
            P::AwsRds,
            K::RelationalDatabase,
            Err("do not share one region"),
        ),
        case(
            "postgresql://app:pw@a.abc.eu-west-1.rds.amazonaws.com,db.example.com/app",
            P::Unknown,
            K::RelationalDatabase,
            Err("do not share one region"),
        ),
    ]);
}

#[test]
fn unreadable_connection_strings_are_reported_without_their_text() {
    for value in [
        "postgres://app:pw@bad host/app",
        "redis://:pw@host:port",
        "https://",
    ] {
        let site = ServiceSite::from_var("VAR", value).unwrap_or_else(|| panic!("`{value}`"));
        assert_eq!(site.provider(), P::Unknown);
        assert_eq!(site.region(), None);
        assert!(site.reason().is_some_and(|r| r.contains("not shown")));
    }
}

#[test]
fn values_that_are_not_connection_strings() {
    for value in [
        "",
        "8080",
        "true",
        "eu-central-1",
        "ftp://files.example.com",
        "db.example.com:5432",
    ] {
        assert_eq!(ServiceSite::from_var("VAR", value), None, "`{value}`");
    }
}

fn compute(vars: &[(&str, &str)]) -> Option<ComputeSite> {
    ComputeSite::from_vars(vars.iter().copied())
}

#[test]
fn vercel_regions_map_to_aws_regions() {
    for (code, region) in [
        ("iad1", "us-east-1"),
        ("fra1", "eu-central-1"),
        ("cle1", "us-east-2"),
        ("sfo1", "us-west-1"),
        ("pdx1", "us-west-2"),
        ("dub1", "eu-west-1"),
        ("lhr1", "eu-west-2"),
        ("cdg1", "eu-west-3"),
        ("arn1", "eu-north-1"),
        ("hnd1", "ap-northeast-1"),
        ("icn1", "ap-northeast-2"),
        ("kix1", "ap-northeast-3"),
        ("sin1", "ap-southeast-1"),
        ("syd1", "ap-southeast-2"),
        ("bom1", "ap-south-1"),
        ("hkg1", "ap-east-1"),
        ("gru1", "sa-east-1"),
        ("cpt1", "af-south-1"),
        ("yul1", "ca-central-1"),
    ] {
        let site = compute(&[("VERCEL", "1"), ("VERCEL_REGION", code)]).unwrap();
        assert_eq!(site.platform(), Platform::Vercel);
        assert_eq!(site.variable(), "VERCEL_REGION");
        assert_eq!(site.code(), Some(code));
        assert_eq!(site.region().map(Region::code), Some(region), "{code}");
        assert_eq!(site.region().map(Region::cloud), Some(Cloud::Aws));
    }
}

#[test]
fn vercel_without_a_region() {
    let build = compute(&[("VERCEL", "1")]).unwrap();
    assert_eq!((build.code(), build.region()), (None, None));
    assert!(
        build
            .reason()
            .is_some_and(|r| r.contains("only while functions run"))
    );

    let dev = compute(&[("VERCEL_REGION", "dev1")]).unwrap();
    assert_eq!((dev.code(), dev.region()), (Some("dev1"), None));
    assert!(dev.reason().is_some_and(|r| r.contains("vercel dev")));

    let unknown = compute(&[("VERCEL_REGION", "zzz9")]).unwrap();
    assert_eq!((unknown.code(), unknown.region()), (Some("zzz9"), None));
    assert!(
        unknown
            .reason()
            .is_some_and(|r| r.contains("not in the probe's table"))
    );

    let garbage = compute(&[("VERCEL_REGION", "Frankfurt please")]).unwrap();
    assert_eq!((garbage.code(), garbage.region()), (None, None));
    assert!(
        garbage
            .reason()
            .is_some_and(|r| r.contains("does not hold a region code"))
    );
}

#[test]
fn fly_regions_map_only_within_a_metro() {
    let fra = compute(&[("FLY_REGION", "fra")]).unwrap();
    assert_eq!(fra.platform(), Platform::Fly);
    assert_eq!(
        (fra.code(), fra.region().map(Region::code)),
        (Some("fra"), Some("eu-central-1"))
    );

    let iad = compute(&[("FLY_APP_NAME", "app"), ("FLY_REGION", "iad")]).unwrap();
    assert_eq!(iad.region().map(Region::code), Some("us-east-1"));

    for code in ["ams", "ord", "sea", "jnb", "mad"] {
        let site = compute(&[("FLY_REGION", code)]).unwrap();
        assert_eq!((site.code(), site.region()), (Some(code), None), "{code}");
        assert!(site.reason().is_some_and(|r| r.contains("own hardware")));
    }

    let garbage = compute(&[("FLY_REGION", "FRA1")]).unwrap();
    assert_eq!(garbage.code(), None);
}

#[test]
fn aws_compute_needs_a_platform_marker() {
    let lambda = compute(&[
        ("AWS_LAMBDA_FUNCTION_NAME", "api"),
        ("AWS_REGION", "eu-west-1"),
    ])
    .unwrap();
    assert_eq!(lambda.platform(), Platform::AwsLambda);
    assert_eq!(lambda.region().map(Region::code), Some("eu-west-1"));

    let ecs = compute(&[
        ("AWS_EXECUTION_ENV", "AWS_ECS_FARGATE"),
        ("AWS_DEFAULT_REGION", "us-east-2"),
    ])
    .unwrap();
    assert_eq!(ecs.platform(), Platform::AwsEcs);
    assert_eq!(ecs.variable(), "AWS_DEFAULT_REGION");
    assert_eq!(ecs.region().map(Region::code), Some("us-east-2"));

    let no_region = compute(&[("AWS_LAMBDA_FUNCTION_NAME", "api")]).unwrap();
    assert_eq!(no_region.region(), None);
    assert!(no_region.reason().is_some_and(|r| r.contains("AWS_REGION")));

    // A developer's laptop with an SDK default region is not AWS compute.
    assert_eq!(compute(&[("AWS_REGION", "eu-west-1")]), None);
    assert_eq!(compute(&[("HOME", "/home/dev")]), None);
}

#[test]
fn vercel_takes_precedence_over_fly_and_aws() {
    let site = compute(&[
        ("FLY_REGION", "ord"),
        ("AWS_LAMBDA_FUNCTION_NAME", "api"),
        ("AWS_REGION", "us-east-1"),
        ("VERCEL_REGION", "fra1"),
    ])
    .unwrap();
    assert_eq!(site.platform(), Platform::Vercel);
    assert_eq!(site.region().map(Region::code), Some("eu-central-1"));
}

#[test]
fn the_map_orders_services_and_keeps_the_last_value_of_a_name() {
    let map = LocalityMap::from_vars([
        (
            "REDIS_URL",
            "redis://sessions.abc123.0001.euc1.cache.amazonaws.com:6379",
        ),
        ("DATABASE_URL", "postgres://app:pw@db.example.com/app"),
        (
            "DATABASE_URL",
            "postgres://app:pw@orders.abc.eu-west-1.rds.amazonaws.com/app",
        ),
        ("STALE_URL", "postgres://app:pw@db.example.com/app"),
        ("STALE_URL", "no longer a URL"),
        ("PORT", "3000"),
    ]);
    let names: Vec<&str> = map.services().iter().map(ServiceSite::variable).collect();
    assert_eq!(names, ["DATABASE_URL", "REDIS_URL"]);
    assert_eq!(
        map.service("DATABASE_URL").map(ServiceSite::provider),
        Some(P::AwsRds)
    );
    assert_eq!(map.service("PORT"), None);
    assert_eq!(map.compute(), None);
}

#[test]
fn hops_compare_each_service_with_the_compute() {
    let map = LocalityMap::from_vars([
        ("VERCEL_REGION", "fra1"),
        (
            "A_SAME",
            "postgres://app:pw@ep-x-123456.eu-central-1.aws.neon.tech/app",
        ),
        (
            "B_FAR",
            "rediss://default:pw@us1-fine-gecko-31710.upstash.io:6379",
        ),
        (
            "C_UNKNOWN",
            "rediss://default:pw@fine-gecko-31710.upstash.io:6379",
        ),
        ("D_LOCAL", "redis://localhost:6379"),
        (
            "E_OTHER_CLOUD",
            "rediss://default:pw@gusc1-fine-gecko-31710.upstash.io:6379",
        ),
    ]);
    let relations: Vec<(&str, RegionMatch)> = map
        .hops()
        .map(|hop| (hop.service.variable(), hop.relation))
        .collect();
    assert_eq!(
        relations,
        [
            ("A_SAME", RegionMatch::Same),
            ("B_FAR", RegionMatch::Different),
            ("C_UNKNOWN", RegionMatch::Unknown),
            ("D_LOCAL", RegionMatch::Same),
            ("E_OTHER_CLOUD", RegionMatch::Unknown),
        ]
    );
}

#[test]
fn the_map_says_why_the_compute_region_is_unknown() {
    let known = LocalityMap::from_vars([("VERCEL_REGION", "fra1")]);
    assert_eq!(known.compute_reason(), None);

    let fly = LocalityMap::from_vars([("FLY_REGION", "ams")]);
    assert_eq!(
        fly.compute_reason(),
        fly.compute().and_then(ComputeSite::reason)
    );
    assert!(fly.compute_reason().is_some());

    let laptop = LocalityMap::from_vars([("AWS_REGION", "eu-west-1")]);
    assert_eq!(
        laptop.compute_reason(),
        Some("no platform variable (VERCEL_REGION, FLY_REGION, AWS_REGION on Lambda or ECS)")
    );
}

#[test]
fn the_printed_map_is_an_aligned_table() {
    let map = LocalityMap::from_vars([
        ("FLY_REGION", "ams"),
        (
            "DATABASE_URL",
            "postgres://app:pw@orders.cluster-abc.eu-west-1.rds.amazonaws.com/app",
        ),
        (
            "KV_URL",
            "rediss://default:pw@fine-gecko-31710.upstash.io:6379",
        ),
    ]);
    assert_eq!(
        map.to_string(),
        "\
compute              —          Fly.io      env:FLY_REGION=ams  Fly.io runs its own hardware, and no cloud region shares this metro area
relational database  eu-west-1  AWS Aurora  env:DATABASE_URL
cache                —          Upstash     env:KV_URL          current Upstash hosts omit the region
"
    );

    assert_eq!(
        LocalityMap::from_vars([("PORT", "3000")]).to_string(),
        "\
compute  —  not detected    no platform variable (VERCEL_REGION, FLY_REGION, AWS_REGION on Lambda or ECS)
(no connection strings found)
"
    );
}

#[test]
fn the_json_form() {
    let map = LocalityMap::from_vars([
        ("VERCEL_REGION", "iad1"),
        (
            "DATABASE_URL",
            "postgres://app:pw@aws-0-eu-central-1.pooler.supabase.com:6543/postgres",
        ),
        (
            "R2_URL",
            "https://0123456789abcdef.r2.cloudflarestorage.com",
        ),
    ]);
    let json = serde_json::to_value(&map).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "compute": {
                "platform": "vercel",
                "variable": "VERCEL_REGION",
                "code": "iad1",
                "region": "us-east-1",
            },
            "services": [
                {
                    "variable": "DATABASE_URL",
                    "provider": "supabase",
                    "kind": "relational_database",
                    "region": "eu-central-1",
                },
                {
                    "variable": "R2_URL",
                    "provider": "cloudflare_r2",
                    "kind": "object_storage",
                    "region": null,
                    "reason": "R2 has no region",
                },
            ],
        })
    );
    let empty =
        serde_json::to_value(LocalityMap::from_vars(Vec::<(String, String)>::new())).unwrap();
    assert_eq!(
        empty,
        serde_json::json!({ "compute": null, "services": [] })
    );
}

#[test]
fn from_env_reads_the_process_environment() {
    // The test process's own environment: whatever it holds, the probe must
    // not fail, and must agree with probing the same variables as a map.
    let from_env = LocalityMap::from_env();
    let vars: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    assert_eq!(from_env, LocalityMap::from_vars(vars));
}
