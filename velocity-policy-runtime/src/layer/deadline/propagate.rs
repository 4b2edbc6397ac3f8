use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderName, HeaderValue, Request};
use tower_layer::Layer;
use tower_service::Service;

use super::headers::{DEADLINE_MS_HEADER, GRPC_TIMEOUT_HEADER};
use crate::Deadline;
use crate::deadline::format_grpc_timeout;

/// Carries the current deadline on outgoing requests (client side); see the
/// [module docs](super).
///
/// On each `call` with a deadline in scope, it sets `grpc-timeout` and the millisecond header
/// ([`DEADLINE_MS_HEADER`] unless configured) to what is left minus the reserve, rounded down:
/// the receiver never waits longer than we would. Outside any scope the request goes as it is.
/// A request's [criticality](crate::criticality) in scope travels the same way, as
/// `x-criticality: sheddable` (the receiver's `CriticalityLayer` admits by it, within what its
/// route allows).
/// Budgets from 1 ms to 10 s go in whole milliseconds (`grpc-timeout: 300m`,
/// `x-deadline-ms: 300`) and allocate nothing; others in the finest unit that fits.
///
/// **Which hosts hear it.** By default every request is stamped, whatever its host: what is
/// left of a budget says how long this request may take, which internal services need and a
/// third party does not. [`PropagateDeadlineLayer::only_to_hosts`] limits the stamping to the
/// hosts you name (exact names, or `*.suffix` for the subdomains of one); a request to any
/// other host, or with no host in its URI, goes as it is.
///
/// ```
/// use std::time::Duration;
/// use velocity_policy_runtime::layer::PropagateDeadlineLayer;
/// use hyper_util::client::legacy::Client;
/// use hyper_util::rt::TokioExecutor;
/// use tower::ServiceBuilder;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let client = Client::builder(TokioExecutor::new()).build_http::<String>();
/// // Keep 20 ms for reading the answer once it arrives.
/// let client = ServiceBuilder::new()
///     .layer(PropagateDeadlineLayer::new().reserve(Duration::from_millis(20)))
///     .service(client);
/// # let _ = client;
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct PropagateDeadlineLayer {
    reserve: Duration,
    ms_header: Option<HeaderName>,
    grpc_timeout: bool,
    /// The hosts that are told the budget; every host when `None`.
    hosts: Option<std::sync::Arc<[HostPattern]>>,
}

/// A host an allowlist names: exactly, or its subdomains (`*.svc.cluster.local`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    Exact(String),
    /// The suffix with its leading dot: `.svc.cluster.local`.
    Subdomains(String),
}

impl HostPattern {
    fn parse(pattern: &str) -> Self {
        let pattern = pattern.trim().to_ascii_lowercase();
        match pattern.strip_prefix('*') {
            Some(suffix) if suffix.starts_with('.') => Self::Subdomains(suffix.to_owned()),
            _ => Self::Exact(pattern),
        }
    }

    fn matches(&self, host: &str) -> bool {
        match self {
            Self::Exact(name) => host.eq_ignore_ascii_case(name),
            Self::Subdomains(suffix) => {
                host.len() > suffix.len()
                    && host
                        .get(host.len() - suffix.len()..)
                        .is_some_and(|end| end.eq_ignore_ascii_case(suffix))
            }
        }
    }
}

impl Default for PropagateDeadlineLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl PropagateDeadlineLayer {
    /// Sets both headers, with no reserve.
    pub fn new() -> Self {
        Self {
            reserve: Duration::ZERO,
            ms_header: Some(HeaderName::from_static(DEADLINE_MS_HEADER)),
            grpc_timeout: true,
            hosts: None,
        }
    }

    /// Stamps only requests to these hosts: exact names (`search.internal`), or `*.suffix` for
    /// every subdomain of one (`*.svc.cluster.local`), compared without case. Requests to other
    /// hosts, and requests whose URI names no host, go as they are. Without this, every request
    /// is stamped.
    ///
    /// ```
    /// use velocity_policy_runtime::layer::PropagateDeadlineLayer;
    ///
    /// // Internal services hear our budget; the payment provider's API does not.
    /// let layer = PropagateDeadlineLayer::new().only_to_hosts(["*.svc.cluster.local", "search.internal"]);
    /// # let _ = layer;
    /// ```
    pub fn only_to_hosts<I, H>(mut self, hosts: I) -> Self
    where
        I: IntoIterator<Item = H>,
        H: AsRef<str>,
    {
        self.hosts = Some(
            hosts
                .into_iter()
                .map(|h| HostPattern::parse(h.as_ref()))
                .collect(),
        );
        self
    }

    /// Whether a request to `host` is told the budget.
    fn stamps(&self, host: Option<&str>) -> bool {
        match &self.hosts {
            None => true,
            Some(hosts) => {
                host.is_some_and(|host| hosts.iter().any(|pattern| pattern.matches(host)))
            }
        }
    }

    /// Sets the headers on a request to `host` from the current deadline, when one is in scope
    /// and the host is told: what is left minus the reserve (returned).
    pub(crate) fn stamp(
        &self,
        host: Option<&str>,
        headers: &mut http::HeaderMap,
    ) -> Option<Duration> {
        let deadline = Deadline::current();
        let level = crate::criticality::in_scope();
        if (deadline.is_none() && level.is_none()) || !self.stamps(host) {
            return None;
        }
        if let Some(level) = level {
            // The level travels as the deadline does: the next service admits by it (within
            // what its own route allows, see `CriticalityLayer`).
            headers.insert(
                CRITICALITY.clone(),
                HeaderValue::from_static(level.as_str()),
            );
        }
        let deadline = deadline?;
        let left = deadline.remaining().saturating_sub(self.reserve);
        let millis = u64::try_from(left.as_millis()).unwrap_or(u64::MAX);
        if self.grpc_timeout {
            let value = match Millis::text(millis) {
                // Whole milliseconds from 1 ms to 10 s: `"300m"`, nothing allocated.
                Some(text) if millis > 0 => Some(HeaderValue::from_static(text)),
                // Under a millisecond, or 10 s and more: the finest unit that fits.
                _ => HeaderValue::try_from(format_grpc_timeout(left)).ok(),
            };
            if let Some(value) = value {
                headers.insert(GRPC_TIMEOUT.clone(), value);
            }
        }
        if let Some(name) = &self.ms_header {
            let value = match Millis::text(millis) {
                Some(text) => HeaderValue::from_static(&text[..text.len() - 1]),
                None => HeaderValue::from(millis),
            };
            headers.insert(name.clone(), value);
        }
        Some(left)
    }

    /// Time held back for work after the call (reading the answer, writing ours): the
    /// receiver is told what is left minus this.
    pub fn reserve(mut self, reserve: Duration) -> Self {
        self.reserve = reserve;
        self
    }

    /// Sends the millisecond budget in `header` instead of [`DEADLINE_MS_HEADER`].
    pub fn ms_header(mut self, header: HeaderName) -> Self {
        self.ms_header = Some(header);
        self
    }

    /// Sends no millisecond header (only `grpc-timeout`).
    pub fn without_ms_header(mut self) -> Self {
        self.ms_header = None;
        self
    }

    /// Sends no `grpc-timeout` (only the millisecond header).
    pub fn without_grpc_timeout(mut self) -> Self {
        self.grpc_timeout = false;
        self
    }
}

impl<S> Layer<S> for PropagateDeadlineLayer {
    type Service = PropagateDeadline<S>;

    fn layer(&self, inner: S) -> Self::Service {
        PropagateDeadline {
            inner,
            config: self.clone(),
        }
    }
}

/// The service [`PropagateDeadlineLayer`] makes.
#[derive(Debug, Clone)]
pub struct PropagateDeadline<S> {
    inner: S,
    config: PropagateDeadlineLayer,
}

impl<S, B> Service<Request<B>> for PropagateDeadline<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let (mut parts, body) = request.into_parts();
        self.config.stamp(parts.uri.host(), &mut parts.headers);
        self.inner.call(Request::from_parts(parts, body))
    }
}

/// [`GRPC_TIMEOUT_HEADER`] as a [`HeaderName`], built once (a name given as `&str` is parsed on
/// every insert).
static GRPC_TIMEOUT: HeaderName = HeaderName::from_static(GRPC_TIMEOUT_HEADER);

/// [`CRITICALITY_HEADER`](crate::criticality::CRITICALITY_HEADER) as a [`HeaderName`].
static CRITICALITY: HeaderName = HeaderName::from_static(crate::criticality::CRITICALITY_HEADER);

/// The header values of whole milliseconds below [`Millis::COUNT`], written once per process
/// (about 49 KB) so that each call borrows its value instead of allocating one: an
/// [`HeaderValue`] of a number that changes per call is otherwise a new `Bytes`.
struct Millis;

impl Millis {
    /// Budgets below 10 s, the common case for a request, are served from the table.
    const COUNT: u64 = 10_000;

    /// `"{millis}m"`, from the table, when `millis` is below [`Millis::COUNT`].
    fn text(millis: u64) -> Option<&'static str> {
        static TABLE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        if millis >= Self::COUNT {
            return None;
        }
        let table = TABLE.get_or_init(|| {
            use std::fmt::Write as _;
            let mut table = String::with_capacity(49_000);
            for n in 0..Self::COUNT {
                let _ = write!(table, "{n}m");
            }
            table
        });
        // Every number of `digits` digits takes `digits + 1` bytes; shorter ones come first.
        let (mut start, mut first, mut digits) = (0_u64, 0_u64, 1_u64);
        loop {
            let next = if digits == 1 { 10 } else { first * 10 };
            if millis < next {
                break;
            }
            start += (next - first) * (digits + 1);
            first = next;
            digits += 1;
        }
        let at = usize::try_from(start + (millis - first) * (digits + 1)).ok()?;
        let len = usize::try_from(digits + 1).ok()?;
        table.get(at..at + len)
    }
}

#[cfg(test)]
mod tests {
    use super::{HostPattern, Millis, PropagateDeadlineLayer};

    #[test]
    fn only_the_named_hosts_are_stamped() {
        let layer =
            PropagateDeadlineLayer::new().only_to_hosts(["*.svc.cluster.local", "Search.Internal"]);
        let stamps = |uri: &str| layer.stamps(uri.parse::<http::Uri>().unwrap_or_default().host());
        assert!(stamps("http://search.internal/q"));
        assert!(stamps("http://SEARCH.internal:8080/q"));
        assert!(stamps("http://users.prod.svc.cluster.local/u/1"));
        assert!(
            !stamps("http://svc.cluster.local/"),
            "the suffix itself is not a subdomain"
        );
        assert!(!stamps("http://evilsvc.cluster.local/"));
        assert!(!stamps("https://api.payments.example/charge"));
        assert!(!stamps("/relative"), "no host: not stamped");
        assert!(
            PropagateDeadlineLayer::new().stamps(
                "https://api.payments.example/"
                    .parse::<http::Uri>()
                    .unwrap_or_default()
                    .host()
            )
        );
        assert_eq!(HostPattern::parse("*"), HostPattern::Exact("*".into()));
    }

    #[test]
    fn the_table_holds_every_millisecond_value_below_ten_seconds() {
        for millis in 0..Millis::COUNT {
            assert_eq!(Millis::text(millis), Some(format!("{millis}m").as_str()));
        }
        assert_eq!(Millis::text(Millis::COUNT), None);
        assert_eq!(Millis::text(u64::MAX), None);
    }
}
