use std::sync::Arc;
use std::time::Duration;

use http::{Extensions, HeaderMap, HeaderName, HeaderValue};
use tower_layer::Layer;

use super::headers::DEADLINE_MS_HEADER;
use super::{Config, DeadlineService};
use crate::Deadline;

/// Stamps one deadline per request; see the [module docs](super).
#[derive(Debug, Clone)]
pub struct DeadlineLayer {
    pub(super) config: Arc<Config>,
}

/// Whose deadline headers a [`DeadlineLayer`] believes ([`DeadlineLayer::trust_headers`]).
///
/// A caller's `grpc-timeout` or millisecond header can only **shorten** the request's budget,
/// never lengthen it, and an expiry under a budget the caller shortened is the caller's: no
/// breaker counts it, no retry repeats it, no shared store hears of it. So believing every
/// caller ([`HeaderTrust::All`], the default) is safe for the service's dependencies; what a
/// caller still chooses is how long the service works on *its* request. Behind your own edge
/// that is what you want: a caller that will give up after 300 ms should not have us work for
/// 5 s on an answer nobody reads, and our own calls downstream carry what is left.
///
/// On the public internet, a client's header is only a hint. [`HeaderTrust::None`] ignores
/// it (every request gets the configured budget: a public client cannot make us give up early
/// and we never cut work short for it, at the price of sometimes finishing work nobody waits
/// for); the two `Internal` forms believe only callers your own edge or mesh marked.
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum HeaderTrust {
    /// Every caller's headers (the default): for services behind your own edge.
    #[default]
    All,
    /// No caller's: every request gets the configured budget. For an edge on the public
    /// internet whose callers must not choose their own budget.
    None,
    /// Only requests that carry `name` with exactly `value`, a marker your edge or mesh adds to
    /// internal calls and **strips from public traffic** (otherwise anyone can send it).
    InternalHeader {
        /// The marker's header.
        name: HeaderName,
        /// The value it must have.
        value: HeaderValue,
    },
    /// Only requests the predicate accepts: given the request's headers and extensions (where,
    /// say, axum's `ConnectInfo` or a TLS layer's peer certificate live). It is asked only of a
    /// request that has headers: one without has no budget to believe.
    InternalWhen(IsInternal),
}

/// A predicate that says whether a request comes from an internal caller, given its headers
/// and extensions ([`HeaderTrust::InternalWhen`]).
pub type IsInternal = Arc<dyn Fn(&HeaderMap, &Extensions) -> bool + Send + Sync>;

impl HeaderTrust {
    /// Whether a request with these headers and extensions may set its own budget.
    #[inline]
    pub(crate) fn believes(&self, headers: &HeaderMap, extensions: &Extensions) -> bool {
        match self {
            Self::All => true,
            Self::None => false,
            Self::InternalHeader { name, value } => headers.get(name) == Some(value),
            Self::InternalWhen(predicate) => predicate(headers, extensions),
        }
    }
}

impl std::fmt::Debug for HeaderTrust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::All => f.write_str("All"),
            Self::None => f.write_str("None"),
            // The marker's value may be a shared secret: never printed.
            Self::InternalHeader { name, .. } => f
                .debug_struct("InternalHeader")
                .field("name", name)
                .finish_non_exhaustive(),
            Self::InternalWhen(_) => f.write_str("InternalWhen(..)"),
        }
    }
}

impl DeadlineLayer {
    /// The name refusals carry unless [`DeadlineLayer::name`] sets another: `request`.
    pub const DEFAULT_NAME: &'static str = "request";

    /// Every request gets at most `budget` (at most [`Deadline::MAX_BUDGET`]); a caller may send
    /// less, never more. No minimum: only a request that arrives with nothing left is
    /// refused. Reads `grpc-timeout` and [`DEADLINE_MS_HEADER`].
    pub fn new(budget: Duration) -> Self {
        let budget = budget.min(Deadline::MAX_BUDGET);
        // The dashboard's trees put the request's budget above their entry points.
        crate::Registry::global().note_request_budget(budget);
        Self {
            config: Arc::new(Config {
                name: Arc::from(Self::DEFAULT_NAME),
                budget,
                min_budget: Duration::ZERO,
                ms_header: Some(HeaderName::from_static(DEADLINE_MS_HEADER)),
                grpc_timeout: true,
                trust: HeaderTrust::All,
            }),
        }
    }

    fn edit(mut self, f: impl FnOnce(&mut Config)) -> Self {
        let mut config = Config {
            name: self.config.name.clone(),
            budget: self.config.budget,
            min_budget: self.config.min_budget,
            ms_header: self.config.ms_header.clone(),
            grpc_timeout: self.config.grpc_timeout,
            trust: self.config.trust.clone(),
        };
        f(&mut config);
        self.config = Arc::new(config);
        self
    }

    /// The least budget worth starting a request with: a request that arrives with less is
    /// answered at once, and the handler never runs.
    pub fn min_budget(self, min_budget: Duration) -> Self {
        crate::Registry::global().note_request_min_budget(min_budget);
        self.edit(|c| c.min_budget = min_budget)
    }

    /// The name refusals carry (the `ResilienceError`'s name and the tracing field `name`).
    pub fn name(self, name: &str) -> Self {
        let name = Arc::from(name);
        self.edit(|c| c.name = name)
    }

    /// Reads the caller's millisecond budget from `header` instead of [`DEADLINE_MS_HEADER`].
    pub fn ms_header(self, header: HeaderName) -> Self {
        self.edit(|c| c.ms_header = Some(header))
    }

    /// Reads no millisecond header (only `grpc-timeout`, unless that is off too).
    pub fn without_ms_header(self) -> Self {
        self.edit(|c| c.ms_header = None)
    }

    /// Ignores `grpc-timeout`: for an edge whose callers must not choose their own budget.
    pub fn without_grpc_timeout(self) -> Self {
        self.edit(|c| c.grpc_timeout = false)
    }

    /// Whose deadline headers to believe: every caller's ([`HeaderTrust::All`], the default),
    /// no caller's ([`HeaderTrust::None`]), or only internal callers'. See [`HeaderTrust`] for
    /// the trade-off.
    ///
    /// ```
    /// use std::time::Duration;
    /// use http::{HeaderName, HeaderValue};
    /// use velocity_policy_runtime::layer::DeadlineLayer;
    /// use velocity_policy_runtime::layer::deadline::HeaderTrust;
    ///
    /// // A public edge: every request gets 2 s, whatever it sends.
    /// let edge = DeadlineLayer::new(Duration::from_secs(2)).trust_headers(HeaderTrust::None);
    /// // Believe only calls the mesh marked (and strips from public traffic).
    /// let internal = DeadlineLayer::new(Duration::from_secs(2)).trust_headers(HeaderTrust::InternalHeader {
    ///     name: HeaderName::from_static("x-internal-caller"),
    ///     value: HeaderValue::from_static("mesh"),
    /// });
    /// # let _ = (edge, internal);
    /// ```
    pub fn trust_headers(self, trust: HeaderTrust) -> Self {
        self.edit(|c| c.trust = trust)
    }

    /// Believes deadline headers only from requests `is_internal` accepts, given their headers
    /// and extensions: [`HeaderTrust::InternalWhen`].
    pub fn trust_headers_when(
        self,
        is_internal: impl Fn(&HeaderMap, &Extensions) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.trust_headers(HeaderTrust::InternalWhen(Arc::new(is_internal)))
    }

    /// The configured budget.
    pub fn budget(&self) -> Duration {
        self.config.budget
    }
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = DeadlineService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        DeadlineService::new(inner, self.config.clone())
    }
}
