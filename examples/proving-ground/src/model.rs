//! What the three processes and the report share: the dependency's modes, the request
//! classes, the contenders, the scenarios and their phases, and one record per request.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The header a service sends only so the dependency can count wasted work: how long the
/// caller's attempt waits (its own timeout), in milliseconds. The dependency never drops or
/// refuses on it (only a propagated deadline does that); it decides only whether a completion
/// came after anyone was still waiting.
pub const ACCOUNTING_HEADER: &str = "x-attempt-timeout-ms";

/// The load generator's timeout, and the dependency's accounting bound for a caller that says
/// nothing about its own.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(1);

/// What the dependency does with a request right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum Mode {
    /// Queues it and serves it in the service time.
    Healthy,
    /// Queues it and serves it in `factor` times the service time.
    Slow {
        /// The service time's multiplier.
        factor: u32,
    },
    /// Answers 503 at once.
    Down,
    /// Answers 429 at once, with `Retry-After: retry_after_s`.
    TooManyRequests {
        /// The pause it asks for, in whole seconds.
        retry_after_s: u32,
    },
    /// Never answers.
    Blackhole,
}

/// A change of the dependency: its mode and, optionally, its slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Control {
    /// The mode from now on.
    pub mode: Mode,
    /// The slots from now on (`None`: unchanged).
    pub slots: Option<u32>,
}

/// A request's class: critical work must be answered; sheddable work may be refused first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// `/critical`.
    Critical,
    /// `/sheddable`.
    Sheddable,
}

impl Class {
    /// The service's route for the class.
    pub const fn path(self) -> &'static str {
        match self {
            Self::Critical => "/critical",
            Self::Sheddable => "/sheddable",
        }
    }
}

/// The six services under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Contender {
    /// 1. A 500 ms timeout, nothing else.
    None,
    /// 2. Three attempts of 150 ms each, no backoff, no budget: the hand-written loop.
    Naive,
    /// 3. tower 0.5: `Retry` (`TpsBudget`, full-jitter backoff), `Timeout`,
    ///    `ConcurrencyLimit`, `LoadShed`.
    Tower,
    /// 4. tower-resilience 0.13: retry (token-bucket budget), circuit breaker, bulkhead,
    ///    time limiter.
    TowerResilience,
    /// 5. This engine through the attributes and `policies/proving.policy`.
    PolicyAttributes,
    /// 6. This engine through the layers: `DeadlineLayer`, `operation_layer!`,
    ///    `CriticalityLayer`, `PropagateDeadlineLayer`.
    PolicyLayers,
}

impl Contender {
    /// Every contender, in the report's order.
    pub const ALL: [Contender; 6] = [
        Self::None,
        Self::Naive,
        Self::Tower,
        Self::TowerResilience,
        Self::PolicyAttributes,
        Self::PolicyLayers,
    ];

    /// Its name in tables, charts and the JSON.
    pub const fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Naive => "naive",
            Self::Tower => "tower",
            Self::TowerResilience => "tower-resilience",
            Self::PolicyAttributes => "policy-attributes",
            Self::PolicyLayers => "policy-layers",
        }
    }

    /// Whether it is this engine.
    pub const fn is_ours(self) -> bool {
        matches!(self, Self::PolicyAttributes | Self::PolicyLayers)
    }

    /// Where its configuration comes from (shown in the HTML page).
    pub const fn source(self) -> &'static str {
        match self {
            Self::None => "the issue: a 500 ms timeout around the call",
            Self::Naive => "the issue: 3 attempts of 150 ms, no backoff, no budget",
            Self::Tower => {
                "tower 0.5 docs: tower::retry::budget (the Policy example, TpsBudget::default() = 10 s, 10/s, 20%), \
                 tower::ServiceBuilder (load_shed, concurrency_limit, timeout); full jitter as AWS's \
                 'Exponential Backoff And Jitter' that tower's backoff docs link"
            }
            Self::TowerResilience => {
                "tower-resilience 0.13 README (Quick Start: failure_rate_threshold(0.5), sliding_window_size(100); \
                 Presets: BulkheadLayer::small(), RetryLayer::exponential_backoff(); Retry budgets: token bucket 10/s, \
                 max 100) and docs/circuitbreaker-tower-comparison.md (retry outermost, retry_on excludes an open circuit)"
            }
            Self::PolicyAttributes => {
                "the facade's guides (attributes, policy_files, layers: How much a request matters, \
                 sizing): policies/proving.policy"
            }
            Self::PolicyLayers => {
                "the facade's guide::layers (DeadlineLayer, operation_layer!, CriticalityLayer, \
                 PropagateDeadlineLayer; How much a request matters) with the same policies/proving.policy"
            }
        }
    }
}

/// The fault a scenario switches on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Fault {
    /// The change at the fault's start (healthy with all slots comes back at its end).
    pub control: Control,
    /// Sheddable work offered on top of critical during the fault, in requests per second.
    pub sheddable_rps: f64,
}

/// One scenario: a healthy baseline, the fault, the after.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    /// Its name.
    pub name: &'static str,
    /// What it reproduces, in a line.
    pub what: &'static str,
    /// Critical requests per second, offered through all three phases.
    pub critical_rps: f64,
    /// The fault.
    pub fault: Fault,
}

/// The phases' lengths.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Phases {
    /// Load before t = 0, not measured (connections, breakers' windows, adaptive limits).
    pub warmup_s: f64,
    /// The healthy baseline, from t = 0.
    pub baseline_s: f64,
    /// The fault.
    pub fault_s: f64,
    /// After the fault cleared.
    pub after_s: f64,
}

impl Phases {
    /// The full run's: 10 s healthy, 10 s of fault, 22 s after (stuck is judged 20 s after).
    pub const FULL: Phases = Phases {
        warmup_s: 2.0,
        baseline_s: 10.0,
        fault_s: 10.0,
        after_s: 22.0,
    };
    /// `--quick`: a smoke run of every contender in every scenario.
    pub const QUICK: Phases = Phases {
        warmup_s: 0.5,
        baseline_s: 1.5,
        fault_s: 1.5,
        after_s: 2.0,
    };

    /// When the fault starts, in seconds from t = 0.
    pub fn fault_start(&self) -> f64 {
        self.baseline_s
    }

    /// When the fault ends.
    pub fn fault_end(&self) -> f64 {
        self.baseline_s + self.fault_s
    }

    /// When the measured run ends.
    pub fn end(&self) -> f64 {
        self.baseline_s + self.fault_s + self.after_s
    }
}

/// The dependency's defaults: 10 slots of 10 ms, so about 1,000 requests per second.
pub const DEFAULT_SLOTS: u32 = 10;
/// See [`DEFAULT_SLOTS`].
pub const DEFAULT_SERVICE_TIME: Duration = Duration::from_millis(10);

/// The scenarios, for a dependency of `capacity` requests per second.
pub fn scenarios(capacity: f64) -> Vec<Scenario> {
    let healthy = |mode| Control { mode, slots: None };
    vec![
        Scenario {
            name: "outage",
            what: "70% load, the dependency answers 503 at once for the fault",
            critical_rps: 0.7 * capacity,
            fault: Fault {
                control: healthy(Mode::Down),
                sheddable_rps: 0.0,
            },
        },
        Scenario {
            name: "metastable",
            what: "70% load, capacity 10 slots to 2 for the fault, then healthy (OSDI'22's retry trigger)",
            critical_rps: 0.7 * capacity,
            fault: Fault {
                control: Control {
                    mode: Mode::Healthy,
                    slots: Some(2),
                },
                sheddable_rps: 0.0,
            },
        },
        Scenario {
            name: "slow",
            what: "70% load, the service time x3 for the fault (the dependency serves a third)",
            critical_rps: 0.7 * capacity,
            fault: Fault {
                control: healthy(Mode::Slow { factor: 3 }),
                sheddable_rps: 0.0,
            },
        },
        Scenario {
            name: "blackhole",
            what: "50% load, the dependency never answers during the fault",
            critical_rps: 0.5 * capacity,
            fault: Fault {
                control: healthy(Mode::Blackhole),
                sheddable_rps: 0.0,
            },
        },
        Scenario {
            name: "429",
            what: "70% load, 429 with Retry-After: 1 for the fault",
            critical_rps: 0.7 * capacity,
            fault: Fault {
                control: healthy(Mode::TooManyRequests { retry_after_s: 1 }),
                sheddable_rps: 0.0,
            },
        },
        Scenario {
            name: "spike",
            what: "50% critical load, plus twice that in sheddable work during the fault (150% in all)",
            critical_rps: 0.5 * capacity,
            fault: Fault {
                control: healthy(Mode::Healthy),
                sheddable_rps: 1.0 * capacity,
            },
        },
    ]
}

/// What became of one request the load generator sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// When it was sent, in milliseconds from the scenario's t = 0 (negative in the warm-up).
    pub sent_ms: f64,
    /// How long it took to an answer or to the client's timeout, in milliseconds.
    pub latency_ms: f64,
    /// The answer's status; 0 when the client timed out, 1 when the connection failed.
    pub status: u16,
    /// Its class.
    pub class: Class,
    /// For a failure, what ended it: the service's `x-why` code (which mechanism refused, or
    /// what the dependency answered), `client_timeout`, `transport`, or `status_NNN`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl Record {
    /// A 2xx answer within the client's timeout.
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// When it ended, in milliseconds from t = 0.
    pub fn ended_ms(&self) -> f64 {
        self.sent_ms + self.latency_ms
    }
}

/// Status 0 in a [`Record`]: the client's 1 s timeout.
pub const TIMED_OUT: u16 = 0;
/// Status 1 in a [`Record`]: connecting or sending failed.
pub const TRANSPORT_ERROR: u16 = 1;
