//! Compute and data locality, derived from the environment rather than typed.
//!
//! A function near the user but far from its database pays the distance once
//! per round trip, and a page render makes several. The probe reads where the
//! compute runs from the platform's variables (`VERCEL_REGION`, `FLY_REGION`,
//! `AWS_REGION` on Lambda or ECS) and where each service runs from the host
//! names in connection strings, so that the two sides can be compared.
//!
//! - **Regions only.** A connection string is cut down to its host names before
//!   anything parses it, each host is reduced to a provider and a validated
//!   region code, and the string is dropped. Nothing the probe returns, prints
//!   or serializes holds a host, a user, a password or a query; the only text
//!   taken from input is the variable's name and a region code of a checked
//!   shape. Values read from the process environment are held as
//!   [`secrecy::SecretString`] while they are read, and zeroized after.
//! - **`region: null` is an answer.** Several providers keep the region out of
//!   everything the application can see (current Upstash hosts, Supabase
//!   project hosts, Cloudflare R2, PlanetScale's global host). Then the region is
//!   `None` and [`ServiceSite::reason`](crate::locality::ServiceSite::reason) says why, in a fixed sentence.
//!
//! ```
//! use velocity_policy_delivery::locality::{LocalityMap, Provider, RegionMatch};
//!
//! let map = LocalityMap::from_vars([
//!     ("VERCEL", "1"),
//!     ("VERCEL_REGION", "iad1"),
//!     ("DATABASE_URL", "postgres://app:hunter2hunter2@ep-quiet-fog-123456-pooler.eu-central-1.aws.neon.tech/app"),
//!     ("UPSTASH_REDIS_REST_URL", "https://fine-gecko-12345.upstash.io"),
//!     ("R2_ENDPOINT", "https://0123456789abcdef.r2.cloudflarestorage.com"),
//!     ("PORT", "3000"),
//! ]);
//!
//! let database = map.service("DATABASE_URL").unwrap();
//! assert_eq!(database.provider(), Provider::Neon);
//! assert_eq!(database.relative_to(map.compute()), RegionMatch::Different);
//!
//! let table = map.to_string();
//! assert_eq!(
//!     table,
//!     "\
//! compute              us-east-1     Vercel         env:VERCEL_REGION=iad1
//! relational database  eu-central-1  Neon           env:DATABASE_URL
//! object storage       —             Cloudflare R2  env:R2_ENDPOINT             R2 has no region
//! cache                —             Upstash        env:UPSTASH_REDIS_REST_URL  current Upstash hosts omit the region
//! "
//! );
//! assert!(!table.contains("hunter2") && !table.contains("neon.tech"));
//!
//! let json = serde_json::to_value(&map).unwrap();
//! assert_eq!(json["services"][0]["region"], "eu-central-1");
//! assert_eq!(json["services"][2]["region"], serde_json::Value::Null);
//! ```

use std::collections::BTreeMap;
use std::fmt;

use secrecy::{ExposeSecret, SecretString};
use serde::Serialize;

mod compute;
mod connection;
pub mod env_file;
#[cfg(feature = "hops")]
pub mod hops;
mod kind;
mod provider;
mod region;
mod service;

pub use compute::{ComputeSite, Platform};
pub use kind::ServiceKind;
pub use provider::Provider;
pub use region::{Cloud, Region, RegionError, RegionMatch};
pub use service::ServiceSite;

/// Where the compute runs and where each service it talks to runs.
///
/// Made by [`LocalityMap::from_env`] or [`LocalityMap::from_vars`]. It prints
/// as an aligned table ([`Display`](fmt::Display)) and serializes as
/// `{"compute": {...} | null, "services": [...]}`, services ordered by
/// variable name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LocalityMap {
    compute: Option<ComputeSite>,
    services: Vec<ServiceSite>,
}

impl LocalityMap {
    /// Probes the process environment.
    ///
    /// Variables whose name or value is not valid UTF-8 are skipped. Each value
    /// is held as a [`SecretString`] while it is read and zeroized after; the
    /// environment itself keeps its own copy, which no probe can erase.
    #[must_use]
    pub fn from_env() -> Self {
        let mut probe = Probe::default();
        for (name, value) in std::env::vars_os() {
            let (Ok(name), Ok(value)) = (name.into_string(), value.into_string()) else {
                continue;
            };
            let value = SecretString::from(value);
            probe.note(&name, value.expose_secret());
        }
        probe.finish()
    }

    /// Probes a given set of variables, as `(name, value)` pairs: a map, a
    /// slice of tuples, a `.env` file already split into lines.
    ///
    /// A name given twice keeps its last value. Values are read and dropped;
    /// none is kept.
    #[must_use]
    pub fn from_vars<I, K, V>(vars: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut probe = Probe::default();
        for (name, value) in vars {
            probe.note(name.as_ref(), value.as_ref());
        }
        probe.finish()
    }

    /// Where the compute runs, if a platform was recognised.
    #[must_use]
    pub const fn compute(&self) -> Option<&ComputeSite> {
        self.compute.as_ref()
    }

    /// Why the compute's region is unknown, as a fixed sentence: the compute site's
    /// [`reason`](ComputeSite::reason), or that no platform was recognised. `None` when the
    /// region is known.
    ///
    /// ```
    /// use velocity_policy_delivery::locality::LocalityMap;
    ///
    /// let laptop = LocalityMap::from_vars([("DATABASE_URL", "postgres://localhost/app")]);
    /// assert!(laptop.compute_reason().is_some_and(|why| why.starts_with("no platform variable")));
    ///
    /// let vercel = LocalityMap::from_vars([("VERCEL_REGION", "fra1")]);
    /// assert_eq!(vercel.compute_reason(), None);
    /// ```
    #[must_use]
    pub fn compute_reason(&self) -> Option<&'static str> {
        match &self.compute {
            Some(site) => site.reason(),
            None => Some(NO_PLATFORM),
        }
    }

    /// Every variable that held a connection string, ordered by name.
    #[must_use]
    pub fn services(&self) -> &[ServiceSite] {
        &self.services
    }

    /// The service named by `variable`, if that variable held a connection string.
    #[must_use]
    pub fn service(&self, variable: &str) -> Option<&ServiceSite> {
        self.services
            .binary_search_by(|site| site.variable().cmp(variable))
            .ok()
            .and_then(|at| self.services.get(at))
    }

    /// Each service with how its region relates to the compute's: what
    /// `policy locality --check` looks at for the blocking hops it was told about.
    pub fn hops(&self) -> impl Iterator<Item = Hop<'_>> {
        self.services.iter().map(|service| Hop {
            service,
            relation: service.relative_to(self.compute()),
        })
    }
}

/// One service seen from the compute: the call the compute makes to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Hop<'a> {
    /// The service called.
    pub service: &'a ServiceSite,
    /// Whether the call stays in the compute's region.
    pub relation: RegionMatch,
}

/// Collects the findings of one scan. Holds no value, only what was derived.
#[derive(Debug, Default)]
struct Probe {
    platform: compute::PlatformVars,
    services: BTreeMap<String, ServiceSite>,
}

impl Probe {
    fn note(&mut self, name: &str, value: &str) {
        self.platform.note(name, value);
        match ServiceSite::from_var(name, value) {
            Some(site) => {
                self.services.insert(name.to_owned(), site);
            }
            None => {
                self.services.remove(name);
            }
        }
    }

    fn finish(self) -> LocalityMap {
        LocalityMap {
            compute: self.platform.site(),
            services: self.services.into_values().collect(),
        }
    }
}

/// What the table prints for a region that is `None`.
const NO_REGION: &str = "—";

/// Why no compute row has a region when no platform was recognised.
const NO_PLATFORM: &str =
    "no platform variable (VERCEL_REGION, FLY_REGION, AWS_REGION on Lambda or ECS)";

impl fmt::Display for LocalityMap {
    /// An aligned table: kind, region (`—` when unknown), provider, variable, reason.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let region = |r: Option<&Region>| r.map_or_else(|| NO_REGION.to_owned(), Region::to_string);
        let mut rows: Vec<[String; 5]> = Vec::with_capacity(self.services.len() + 1);
        rows.push(match &self.compute {
            Some(site) => [
                "compute".to_owned(),
                region(site.region()),
                site.platform().name().to_owned(),
                match site.code() {
                    Some(code) => format!("env:{}={code}", site.variable()),
                    None => format!("env:{}", site.variable()),
                },
                site.reason().unwrap_or_default().to_owned(),
            ],
            None => [
                "compute".to_owned(),
                NO_REGION.to_owned(),
                "not detected".to_owned(),
                String::new(),
                NO_PLATFORM.to_owned(),
            ],
        });
        rows.extend(self.services.iter().map(|site| {
            [
                site.kind().name().to_owned(),
                region(site.region()),
                site.provider().name().to_owned(),
                format!("env:{}", site.variable()),
                site.reason().unwrap_or_default().to_owned(),
            ]
        }));

        let mut widths = [0_usize; 5];
        for row in &rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        for row in &rows {
            let mut line = String::new();
            for (column, (cell, width)) in row.iter().zip(widths).enumerate() {
                if column > 0 {
                    line.push_str("  ");
                }
                line.push_str(cell);
                let padding = width.saturating_sub(cell.chars().count());
                line.extend(std::iter::repeat_n(' ', padding));
            }
            writeln!(f, "{}", line.trim_end())?;
        }
        if self.services.is_empty() {
            writeln!(f, "(no connection strings found)")?;
        }
        Ok(())
    }
}
