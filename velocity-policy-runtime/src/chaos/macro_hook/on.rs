//! The expansion's chaos step with the `chaos` feature: the registry's drills.

use std::time::Duration;

use crate::__macro_support::{Handle, Register};
use crate::chaos::{ChaosSettings, Fault, Latency};

/// The registry's chaos, as the expansion names it.
pub type Chaos = crate::chaos::Chaos;

impl Register for Chaos {
    const KIND: &'static str = "chaos";
    type Settings = ChaosSettings;
    const NONE: ChaosSettings = ChaosSettings::NONE;
    type Handle = Chaos;
    fn register(name: &'static str, settings: Self::Settings) -> Self::Handle {
        let chaos = crate::registry::Registry::global().chaos(name);
        chaos.declare(&settings);
        chaos
    }
}

impl Handle<Chaos> {
    /// The chaos `name`, declared by `origin`.
    pub const fn chaos(name: &'static str, origin: &'static str) -> Self {
        Self::new(name, origin)
    }

    const fn with(mut self, fault: Fault, rate: f64) -> Self {
        self.settings = self.settings.fault(fault, rate);
        self
    }

    /// `latency = D at R`.
    pub const fn latency_fixed(self, delay: Duration, rate: f64) -> Self {
        self.with(Fault::Latency(Latency::Fixed { delay }), rate)
    }

    /// `latency = uniform(MIN, MAX) at R`.
    pub const fn latency_uniform(self, min: Duration, max: Duration, rate: f64) -> Self {
        self.with(Fault::Latency(Latency::Uniform { min, max }), rate)
    }

    /// `latency = lognormal(p50 = .., p99 = ..) at R`.
    pub const fn latency_lognormal(self, p50: Duration, p99: Duration, rate: f64) -> Self {
        self.with(Fault::Latency(Latency::LogNormal { p50, p99 }), rate)
    }

    /// `error at R`.
    pub const fn error(self, rate: f64) -> Self {
        self.with(Fault::Error, rate)
    }

    /// `refuse at R`.
    pub const fn refuse(self, rate: f64) -> Self {
        self.with(Fault::Refuse, rate)
    }

    /// `status 429 retry_after D at R`.
    pub const fn too_many_requests(self, retry_after: Duration, rate: f64) -> Self {
        self.with(Fault::TooManyRequests { retry_after }, rate)
    }

    /// `during = FROM to UNTIL`.
    pub const fn during(mut self, from: Duration, until: Duration) -> Self {
        self.settings.during = Some((from, until));
        self
    }

    /// `instances = S`.
    pub const fn instances(mut self, share: f64) -> Self {
        self.settings.instances = Some(share);
        self
    }

    /// `enabled = B`.
    pub const fn enabled(mut self, on: bool) -> Self {
        self.settings.enabled = on;
        self
    }
}
