//! Who runs a host, and what its name says about the region.
//!
//! Every rule here reads a host name that [`connection`](super::connection)
//! has already cut out of its connection string, keeps at most a validated
//! [`Region`], and explains a missing region with a fixed sentence.

use std::fmt;

use serde::{Serialize, Serializer};

use super::connection::HostName;
use super::kind::ServiceKind;
use super::region::{Region, elasticache_region, lookup};

/// The provider behind a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Provider {
    /// Neon serverless Postgres: `ep-name-123456[-pooler].<region>.aws.neon.tech`.
    Neon,
    /// Vercel Postgres (Neon underneath): `ep-name-123456[-pooler].<region>.postgres.vercel-storage.com`.
    VercelPostgres,
    /// Supabase: the pooler `aws-0-<region>.pooler.supabase.com`, or a project
    /// host `db.<ref>.supabase.co` / `<ref>.supabase.co`.
    Supabase,
    /// Amazon RDS: `name.xxxx.<region>.rds.amazonaws.com`, and RDS Proxy.
    AwsRds,
    /// Amazon Aurora cluster endpoints: `name.cluster-[ro-|custom-]xxxx.<region>.rds.amazonaws.com`.
    AwsAurora,
    /// Amazon ElastiCache: `name.xxxx.0001.<code>.cache.amazonaws.com`, with
    /// a short region code such as `euc1`.
    AwsElastiCache,
    /// Any other `amazonaws.com` host (S3, API Gateway, MemoryDB, ...).
    Aws,
    /// Upstash Redis: `[<prefix>-]name-12345.upstash.io`.
    Upstash,
    /// PlanetScale: `<slug>.connect.psdb.cloud` (MySQL), `<slug>.pg.psdb.cloud` (Postgres).
    PlanetScale,
    /// Cloudflare R2: `<account>[.<jurisdiction>].r2.cloudflarestorage.com`.
    CloudflareR2,
    /// Neo4j Aura: `<id>.databases.neo4j.io`.
    Neo4jAura,
    /// MongoDB Atlas: `<cluster>.<id>.mongodb.net`.
    MongoDbAtlas,
    /// `localhost`, a loopback address or a Unix socket: beside the compute.
    Local,
    /// Any other host, or a connection string with no readable host.
    Unknown,
}

impl Provider {
    /// The identifier used in JSON: `neon`, `aws_rds`, `cloudflare_r2`, ...
    #[must_use]
    pub const fn id(self) -> &'static str {
        match self {
            Self::Neon => "neon",
            Self::VercelPostgres => "vercel_postgres",
            Self::Supabase => "supabase",
            Self::AwsRds => "aws_rds",
            Self::AwsAurora => "aws_aurora",
            Self::AwsElastiCache => "aws_elasticache",
            Self::Aws => "aws",
            Self::Upstash => "upstash",
            Self::PlanetScale => "planetscale",
            Self::CloudflareR2 => "cloudflare_r2",
            Self::Neo4jAura => "neo4j_aura",
            Self::MongoDbAtlas => "mongodb_atlas",
            Self::Local => "local",
            Self::Unknown => "unknown",
        }
    }

    /// The name printed in the locality table: `Neon`, `AWS RDS`, `Cloudflare R2`, ...
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Neon => "Neon",
            Self::VercelPostgres => "Vercel Postgres",
            Self::Supabase => "Supabase",
            Self::AwsRds => "AWS RDS",
            Self::AwsAurora => "AWS Aurora",
            Self::AwsElastiCache => "AWS ElastiCache",
            Self::Aws => "AWS",
            Self::Upstash => "Upstash",
            Self::PlanetScale => "PlanetScale",
            Self::CloudflareR2 => "Cloudflare R2",
            Self::Neo4jAura => "Neo4j Aura",
            Self::MongoDbAtlas => "MongoDB Atlas",
            Self::Local => "local",
            Self::Unknown => "unknown",
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Provider {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.id())
    }
}

/// What one host says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    pub(crate) provider: Provider,
    /// The region, or why there is none.
    pub(crate) region: Result<Region, &'static str>,
    /// The kind an `http(s)` URL to this provider names, when more precise
    /// than "http api".
    pub(crate) http_kind: Option<ServiceKind>,
}

impl Finding {
    const fn new(provider: Provider, region: Result<Region, &'static str>) -> Self {
        Self {
            provider,
            region,
            http_kind: None,
        }
    }

    /// A connection string with no readable host.
    pub(crate) const fn unreadable() -> Self {
        Self::new(Provider::Unknown, Err(reason::UNREADABLE))
    }

    fn over_http(mut self, kind: ServiceKind) -> Self {
        self.http_kind = Some(kind);
        self
    }
}

/// Classifies one host.
pub(crate) fn classify(host: &HostName) -> Finding {
    match host {
        HostName::Local => Finding::new(Provider::Local, Err(reason::LOCAL)),
        HostName::Ip => Finding::new(Provider::Unknown, Err(reason::IP_ADDRESS)),
        HostName::Domain(name) => classify_domain(name),
    }
}

fn classify_domain(name: &str) -> Finding {
    use ServiceKind::{Cache, HttpApi, ObjectStorage, RelationalDatabase};

    let labels: Vec<&str> = name.split('.').collect();
    let labels = labels.as_slice();
    if let Some(head) = before(labels, &["neon", "tech"]) {
        return neon(head).over_http(RelationalDatabase);
    }
    if let Some(head) = before(labels, &["postgres", "vercel-storage", "com"]) {
        let region = head
            .last()
            .and_then(|l| Region::aws(l))
            .ok_or(reason::NO_REGION_LABEL);
        return Finding::new(Provider::VercelPostgres, region).over_http(RelationalDatabase);
    }
    if let Some(head) = before(labels, &["pooler", "supabase", "com"]) {
        let region = head
            .last()
            .and_then(|l| supabase_pooler_region(l))
            .ok_or(reason::SUPABASE_POOLER_UNKNOWN);
        return Finding::new(Provider::Supabase, region);
    }
    if before(labels, &["supabase", "co"]).is_some()
        || before(labels, &["supabase", "com"]).is_some()
    {
        return Finding::new(Provider::Supabase, Err(reason::SUPABASE_PROJECT)).over_http(HttpApi);
    }
    if let Some(head) = before(labels, &["amazonaws", "com"])
        .or_else(|| before(labels, &["amazonaws", "com", "cn"]))
    {
        return aws(head);
    }
    if let Some(head) = before(labels, &["upstash", "io"]) {
        return upstash(head).over_http(Cache);
    }
    if let Some(head) = before(labels, &["psdb", "cloud"]) {
        return planetscale(head).over_http(RelationalDatabase);
    }
    if let Some(head) = before(labels, &["r2", "cloudflarestorage", "com"]) {
        let why = if head.len() > 1 {
            reason::R2_JURISDICTION
        } else {
            reason::R2
        };
        return Finding::new(Provider::CloudflareR2, Err(why)).over_http(ObjectStorage);
    }
    if before(labels, &["databases", "neo4j", "io"]).is_some() {
        return Finding::new(Provider::Neo4jAura, Err(reason::NEO4J_AURA));
    }
    if before(labels, &["mongodb", "net"]).is_some() {
        return Finding::new(Provider::MongoDbAtlas, Err(reason::MONGODB_ATLAS));
    }
    Finding::new(Provider::Unknown, Err(reason::PLAIN_HOST))
}

/// The labels before `suffix`, if `labels` ends with it and has at least one more.
fn before<'a>(labels: &'a [&'a str], suffix: &[&str]) -> Option<&'a [&'a str]> {
    let cut = labels
        .len()
        .checked_sub(suffix.len())
        .filter(|&cut| cut > 0)?;
    (labels[cut..] == *suffix).then(|| &labels[..cut])
}

/// `ep-name-123456[-pooler].[c-2.]<region>.aws.neon.tech` or
/// `ep-name-123456[-pooler].<location>.azure.neon.tech`.
fn neon(head: &[&str]) -> Finding {
    /// The short names Neon gives Azure regions in its hosts.
    const AZURE: &[(&str, &str)] = &[("gwc", "germanywestcentral")];
    let region = match head {
        [_, .., region, "aws"] => Region::aws(region).ok_or(reason::NO_REGION_LABEL),
        [_, .., location, "azure"] => {
            let name = lookup(AZURE, location).unwrap_or(location);
            Region::azure(name).ok_or(reason::NEON_AZURE_UNKNOWN)
        }
        _ => Err(reason::NO_REGION_LABEL),
    };
    Finding::new(Provider::Neon, region)
}

/// `aws-0-eu-central-1` (the digit numbers the pooler cluster).
fn supabase_pooler_region(label: &str) -> Option<Region> {
    let rest = label.strip_prefix("aws-")?;
    let (cluster, region) = rest.split_once('-')?;
    let numbered = !cluster.is_empty() && cluster.bytes().all(|b| b.is_ascii_digit());
    if numbered { Region::aws(region) } else { None }
}

/// RDS, Aurora and ElastiCache by their service label; any other AWS host by
/// the right-most label that is a region.
fn aws(head: &[&str]) -> Finding {
    match head {
        [_, rest @ .., region, "rds"] => {
            let aurora = rest.first().is_some_and(|l| l.starts_with("cluster-"));
            let provider = if aurora {
                Provider::AwsAurora
            } else {
                Provider::AwsRds
            };
            Finding::new(provider, Region::aws(region).ok_or(reason::NO_REGION_LABEL))
        }
        [_, .., code, "cache"] => {
            let region = elasticache_region(code)
                .or_else(|| Region::aws(code))
                .ok_or(reason::ELASTICACHE_UNKNOWN);
            Finding::new(Provider::AwsElastiCache, region)
        }
        _ => {
            let region = head
                .iter()
                .rev()
                .find_map(|label| Region::aws(label.strip_prefix("s3-").unwrap_or(label)))
                .ok_or(reason::AWS_GLOBAL);
            let s3 = head.iter().any(|l| *l == "s3" || l.starts_with("s3-"));
            let kind = if s3 {
                ServiceKind::ObjectStorage
            } else {
                ServiceKind::HttpApi
            };
            Finding::new(Provider::Aws, region).over_http(kind)
        }
    }
}

/// Legacy hosts carry a region prefix (`eu1-name-12345.upstash.io`); current
/// ones do not (`name-12345.upstash.io`); databases made through Fly.io are
/// `fly-name-12345.upstash.io`.
fn upstash(head: &[&str]) -> Finding {
    /// The prefixes of Upstash's regional databases. Upstash did not document
    /// them: they follow the regions Upstash offered in turn (`us1` N. Virginia,
    /// `usw1` N. California, `eu1` Ireland, `apn1` Tokyo, `gusc1` Google's Iowa,
    /// `eu2` Frankfurt). Any other prefix gives no region.
    const PREFIXES: &[(&str, &str)] = &[
        ("apn1", "ap-northeast-1"),
        ("eu1", "eu-west-1"),
        ("eu2", "eu-central-1"),
        ("gusc1", "us-central1"),
        ("us1", "us-east-1"),
        ("usw1", "us-west-1"),
    ];
    let region = match head {
        [first] => {
            let prefix = first.split('-').next().unwrap_or_default();
            if prefix == "fly" {
                Err(reason::UPSTASH_FLY)
            } else if prefix.bytes().any(|b| b.is_ascii_digit()) {
                lookup(PREFIXES, prefix)
                    .and_then(|region| Region::aws(region).or_else(|| Region::gcp(region)))
                    .ok_or(reason::UPSTASH_UNKNOWN_PREFIX)
            } else {
                Err(reason::UPSTASH_CURRENT)
            }
        }
        _ => Err(reason::UPSTASH_CURRENT),
    };
    Finding::new(Provider::Upstash, region)
}

/// `<slug>.connect.psdb.cloud` and `<slug>[-<cell>].pg.psdb.cloud`, where the
/// slug is `aws` or `gcp` (the global edge), `aws-<region>`, `gcp-<region>`, or
/// one of the first regions' short slugs (`eu-central`).
fn planetscale(head: &[&str]) -> Finding {
    let region = match head {
        ["aws" | "gcp", "connect" | "pg"] => Err(reason::PLANETSCALE_GLOBAL),
        [slug, "connect"] => planetscale_slug(slug).ok_or(reason::PLANETSCALE_UNKNOWN),
        [slug, "pg"] => planetscale_slug(slug)
            .or_else(|| planetscale_slug(without_cell(slug)?))
            .ok_or(reason::PLANETSCALE_UNKNOWN),
        // The first hosts: `<id>.<region>.psdb.cloud`.
        [_, region] => Region::aws(region).ok_or(reason::PLANETSCALE_UNKNOWN),
        _ => Err(reason::PLANETSCALE_UNKNOWN),
    };
    Finding::new(Provider::PlanetScale, region)
}

fn planetscale_slug(slug: &str) -> Option<Region> {
    /// The slugs of PlanetScale's first regions; later ones are `aws-<region>`.
    const SHORT_SLUGS: &[(&str, &str)] = &[
        ("ap-northeast", "ap-northeast-1"),
        ("ap-south", "ap-south-1"),
        ("ap-southeast", "ap-southeast-1"),
        ("eu-central", "eu-central-1"),
        ("eu-west", "eu-west-1"),
        ("us-east", "us-east-1"),
        ("us-west", "us-west-2"),
    ];
    if let Some(region) = slug.strip_prefix("aws-") {
        return Region::aws(region);
    }
    if let Some(region) = slug.strip_prefix("gcp-") {
        return Region::gcp(region);
    }
    lookup(SHORT_SLUGS, slug).map(Region::aws_static)
}

/// `us-east-3` → `us-east`: Postgres hosts number the cell after the slug.
fn without_cell(slug: &str) -> Option<&str> {
    let (slug, cell) = slug.rsplit_once('-')?;
    (!cell.is_empty() && cell.bytes().all(|b| b.is_ascii_digit())).then_some(slug)
}

/// Why a service's region is unknown. Fixed sentences only: nothing here may
/// ever be built from input.
pub(crate) mod reason {
    pub(crate) const PLAIN_HOST: &str = "plain host: region not derivable";
    pub(crate) const UNREADABLE: &str =
        "no host could be read from the connection string (its text is not shown)";
    pub(crate) const HOSTS_DISAGREE: &str =
        "the connection string names hosts that do not share one region";
    pub(crate) const IP_ADDRESS: &str = "an IP address: region not derivable";
    pub(crate) const LOCAL: &str = "local host: beside the compute";
    pub(crate) const NO_REGION_LABEL: &str = "the host has no region label";
    pub(crate) const NEON_AZURE_UNKNOWN: &str = "Neon Azure location not in the probe's table";
    pub(crate) const SUPABASE_PROJECT: &str =
        "Supabase project hosts name the project, not its region (the pooler host names it)";
    pub(crate) const SUPABASE_POOLER_UNKNOWN: &str =
        "Supabase pooler host without a region the probe reads";
    pub(crate) const ELASTICACHE_UNKNOWN: &str = "ElastiCache region code not in the probe's table";
    pub(crate) const AWS_GLOBAL: &str = "AWS host without a region label (a global endpoint)";
    pub(crate) const UPSTASH_CURRENT: &str = "current Upstash hosts omit the region";
    pub(crate) const UPSTASH_UNKNOWN_PREFIX: &str =
        "Upstash region prefix not in the probe's table";
    pub(crate) const UPSTASH_FLY: &str =
        "Upstash through Fly.io: the primary region is a Fly setting, not in the host";
    pub(crate) const PLANETSCALE_GLOBAL: &str =
        "PlanetScale's global host routes to the database's region without naming it";
    pub(crate) const PLANETSCALE_UNKNOWN: &str = "PlanetScale region slug not recognised";
    pub(crate) const R2: &str = "R2 has no region";
    pub(crate) const R2_JURISDICTION: &str =
        "R2 has no region; a jurisdiction bounds where data is stored, not where it is served";
    pub(crate) const NEO4J_AURA: &str = "Neo4j Aura keeps the region out of the host";
    pub(crate) const MONGODB_ATLAS: &str = "Atlas hosts name the cluster, not its region";
}
