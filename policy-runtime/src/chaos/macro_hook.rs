//! The expansion's fault-injection step: `Handle::chaos(..)` and, per attempt after the
//! breaker's check and the bulkhead's admission, `chaos.draw(breaker)?` then
//! `injection.run(body)` under the attempt's deadline. Emitted only for an operation that names
//! a chaos; without the `chaos` feature naming one is a compile error that says how to turn it
//! on, and nothing of this is in the build.

use std::time::Duration;

use super::{Handle, Register};
#[cfg(not(feature = "chaos"))]
use crate::breaker::Breaker;
#[cfg(not(feature = "chaos"))]
use crate::error::ResilienceError;

/// The registry's chaos, as the expansion names it.
#[cfg(feature = "chaos")]
pub type Chaos = crate::chaos::Chaos;

#[cfg(feature = "chaos")]
impl Register for crate::chaos::Chaos {
    const KIND: &'static str = "chaos";
    type Settings = crate::chaos::ChaosSettings;
    const NONE: crate::chaos::ChaosSettings = crate::chaos::ChaosSettings::NONE;
    type Handle = crate::chaos::Chaos;
    fn register(name: &'static str, settings: Self::Settings) -> Self::Handle {
        let chaos = crate::registry::Registry::global().chaos(name);
        chaos.declare(&settings);
        chaos
    }
}

#[cfg(feature = "chaos")]
impl Handle<Chaos> {
    /// The chaos `name`, declared by `origin`.
    pub const fn chaos(name: &'static str, origin: &'static str) -> Self {
        Self::new(name, origin)
    }

    const fn with(mut self, fault: crate::chaos::Fault, rate: f64) -> Self {
        self.settings = self.settings.fault(fault, rate);
        self
    }

    /// `latency = D at R`.
    pub const fn latency_fixed(self, delay: Duration, rate: f64) -> Self {
        self.with(
            crate::chaos::Fault::Latency(crate::chaos::Latency::Fixed { delay }),
            rate,
        )
    }

    /// `latency = uniform(MIN, MAX) at R`.
    pub const fn latency_uniform(self, min: Duration, max: Duration, rate: f64) -> Self {
        self.with(
            crate::chaos::Fault::Latency(crate::chaos::Latency::Uniform { min, max }),
            rate,
        )
    }

    /// `latency = lognormal(p50 = .., p99 = ..) at R`.
    pub const fn latency_lognormal(self, p50: Duration, p99: Duration, rate: f64) -> Self {
        self.with(
            crate::chaos::Fault::Latency(crate::chaos::Latency::LogNormal { p50, p99 }),
            rate,
        )
    }

    /// `error at R`.
    pub const fn error(self, rate: f64) -> Self {
        self.with(crate::chaos::Fault::Error, rate)
    }

    /// `refuse at R`.
    pub const fn refuse(self, rate: f64) -> Self {
        self.with(crate::chaos::Fault::Refuse, rate)
    }

    /// `status 429 retry_after D at R`.
    pub const fn too_many_requests(self, retry_after: Duration, rate: f64) -> Self {
        self.with(crate::chaos::Fault::TooManyRequests { retry_after }, rate)
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

/// Why an operation that names a chaos does not compile without the `chaos` feature.
#[cfg(not(feature = "chaos"))]
#[diagnostic::on_unimplemented(
    message = "`chaos` needs the `chaos` feature of `policy`",
    label = "a chaos drill is used here",
    note = "turn it on in Cargo.toml where drills run (never in a default build): `policy = {{ version = \"..\", features = [\"chaos\"] }}`"
)]
pub trait ChaosFeature {}

/// Stands in for a chaos when the `chaos` feature is off; it cannot draw (see
/// [`ChaosFeature`]).
#[cfg(not(feature = "chaos"))]
#[derive(Debug)]
pub struct Chaos<F = ()>(std::marker::PhantomData<F>);

#[cfg(not(feature = "chaos"))]
impl<F> Clone for Chaos<F> {
    fn clone(&self) -> Self {
        Chaos(std::marker::PhantomData)
    }
}

/// What the stand-in declares: nothing.
#[cfg(not(feature = "chaos"))]
#[derive(Debug, Clone, Copy)]
pub struct ChaosOff;

#[cfg(not(feature = "chaos"))]
impl Register for Chaos {
    const KIND: &'static str = "chaos";
    type Settings = ChaosOff;
    const NONE: ChaosOff = ChaosOff;
    type Handle = Chaos;
    fn register(_name: &'static str, _settings: ChaosOff) -> Chaos {
        Chaos(std::marker::PhantomData)
    }
}

#[cfg(not(feature = "chaos"))]
impl Handle<Chaos> {
    /// The chaos `name`, declared by `origin`.
    pub const fn chaos(name: &'static str, origin: &'static str) -> Self {
        Self::new(name, origin)
    }
    /// Ignored without the feature.
    pub const fn latency_fixed(self, _: Duration, _: f64) -> Self {
        self
    }
    /// Ignored without the feature.
    pub const fn latency_uniform(self, _: Duration, _: Duration, _: f64) -> Self {
        self
    }
    /// Ignored without the feature.
    pub const fn latency_lognormal(self, _: Duration, _: Duration, _: f64) -> Self {
        self
    }
    /// Ignored without the feature.
    pub const fn error(self, _: f64) -> Self {
        self
    }
    /// Ignored without the feature.
    pub const fn refuse(self, _: f64) -> Self {
        self
    }
    /// Ignored without the feature.
    pub const fn too_many_requests(self, _: Duration, _: f64) -> Self {
        self
    }
    /// Ignored without the feature.
    pub const fn during(self, _: Duration, _: Duration) -> Self {
        self
    }
    /// Ignored without the feature.
    pub const fn instances(self, _: f64) -> Self {
        self
    }
    /// Ignored without the feature.
    pub const fn enabled(self, _: bool) -> Self {
        self
    }
}

/// The stand-in's draw: nothing to inject.
#[cfg(not(feature = "chaos"))]
#[derive(Debug)]
pub struct NoInjection;

#[cfg(not(feature = "chaos"))]
impl NoInjection {
    /// The body itself.
    #[inline(always)]
    pub fn run<F>(self, body: F) -> F {
        body
    }
}

#[cfg(not(feature = "chaos"))]
impl<F> Chaos<F> {
    /// Does not compile without the `chaos` feature, with a message saying how to turn it on.
    pub fn draw(&self, _breaker: Option<&Breaker>) -> Result<NoInjection, ResilienceError>
    where
        F: ChaosFeature,
    {
        Ok(NoInjection)
    }
}
