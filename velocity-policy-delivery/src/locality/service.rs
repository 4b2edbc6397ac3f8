//! The data side: one service named by one variable's connection string.

use serde::Serialize;

use super::compute::ComputeSite;
use super::connection::{self, HostName};
use super::kind::ServiceKind;
use super::provider::{self, Finding, Provider, reason};
use super::region::{Region, RegionMatch};

/// A service named by a variable: who provides it, what it is, and where it runs.
///
/// Built from a variable's connection string, of which it keeps nothing but the
/// region code: no host, no user, no password, no query. `region` is `None`
/// exactly when `reason` says why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServiceSite {
    variable: String,
    provider: Provider,
    kind: ServiceKind,
    region: Option<Region>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
}

impl ServiceSite {
    /// Reads one variable. `None` unless `value` is a connection string of a
    /// known scheme (`postgres`, `mysql`, `redis`, `rediss`, `https`, ...).
    ///
    /// A value with a known scheme but no readable host is still reported, as
    /// provider `unknown` with the reason, so that a mistyped URL shows up.
    ///
    /// ```
    /// use velocity_policy_delivery::locality::{Provider, ServiceKind, ServiceSite};
    ///
    /// let site = ServiceSite::from_var(
    ///     "DATABASE_URL",
    ///     "postgres://app:s3cret@ep-quiet-fog-123456-pooler.eu-central-1.aws.neon.tech/app",
    /// )
    /// .unwrap();
    /// assert_eq!(site.provider(), Provider::Neon);
    /// assert_eq!(site.kind(), ServiceKind::RelationalDatabase);
    /// assert_eq!(site.region().map(|r| r.code()), Some("eu-central-1"));
    /// assert!(!format!("{site:?}").contains("s3cret"));
    ///
    /// assert_eq!(ServiceSite::from_var("PORT", "8080"), None);
    /// ```
    #[must_use]
    pub fn from_var(variable: &str, value: &str) -> Option<Self> {
        let (scheme, rest) = connection::scheme(value)?;
        let finding = connection::hosts(rest, scheme)
            .map_or_else(Finding::unreadable, |hosts| combine(&hosts));
        let kind = if scheme.http {
            finding.http_kind.unwrap_or(scheme.kind)
        } else {
            scheme.kind
        };
        let (region, reason) = match finding.region {
            Ok(region) => (Some(region), None),
            Err(reason) => (None, Some(reason)),
        };
        Some(Self {
            variable: variable.to_owned(),
            provider: finding.provider,
            kind,
            region,
            reason,
        })
    }

    /// The variable's name, e.g. `DATABASE_URL`.
    #[must_use]
    pub fn variable(&self) -> &str {
        &self.variable
    }

    /// Who runs the service.
    #[must_use]
    pub const fn provider(&self) -> Provider {
        self.provider
    }

    /// What kind of service it is.
    #[must_use]
    pub const fn kind(&self) -> ServiceKind {
        self.kind
    }

    /// The region the service runs in, if the host name says.
    #[must_use]
    pub const fn region(&self) -> Option<&Region> {
        self.region.as_ref()
    }

    /// Why [`region`](Self::region) is `None`. Always a fixed sentence, never input.
    #[must_use]
    pub const fn reason(&self) -> Option<&'static str> {
        self.reason
    }

    /// How this service's region relates to the compute's.
    ///
    /// A [`Provider::Local`] service is beside the compute wherever that runs,
    /// so it is always [`RegionMatch::Same`].
    #[must_use]
    pub fn relative_to(&self, compute: Option<&ComputeSite>) -> RegionMatch {
        if self.provider == Provider::Local {
            return RegionMatch::Same;
        }
        RegionMatch::between(self.region(), compute.and_then(ComputeSite::region))
    }
}

/// One finding for all the hosts of a connection string: theirs if they agree,
/// otherwise no region.
fn combine(hosts: &[HostName]) -> Finding {
    let mut findings = hosts.iter().map(provider::classify);
    let Some(first) = findings.next() else {
        return Finding::unreadable();
    };
    let mut same_provider = true;
    let mut same_region = true;
    for other in findings {
        same_provider &= other.provider == first.provider;
        same_region &= other.region == first.region;
    }
    match (same_provider, same_region) {
        (true, true) => first,
        (true, false) => Finding {
            region: Err(reason::HOSTS_DISAGREE),
            ..first
        },
        (false, _) => Finding {
            provider: Provider::Unknown,
            region: Err(reason::HOSTS_DISAGREE),
            http_kind: None,
        },
    }
}
