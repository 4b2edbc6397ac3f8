//! The expansion's chaos step without the `chaos` feature: a stand-in whose draw does not
//! compile, with a message saying how to turn the feature on.

use std::time::Duration;

use crate::__macro_support::{Handle, Register};
use crate::breaker::Breaker;
use crate::error::{CallError, DeadlineExceeded, ResilienceError};

/// Why an operation that names a chaos does not compile without the `chaos` feature.
#[diagnostic::on_unimplemented(
    message = "`chaos` needs the `chaos` feature of `policy`",
    label = "a chaos drill is used here",
    note = "turn it on in Cargo.toml where drills run (never in a default build): `policy = {{ version = \"..\", features = [\"chaos\"] }}`"
)]
pub trait ChaosFeature {}

/// Stands in for a chaos when the `chaos` feature is off; it cannot draw (see
/// [`ChaosFeature`]).
#[derive(Debug)]
pub struct Chaos<F = ()>(std::marker::PhantomData<F>);

impl<F> Clone for Chaos<F> {
    fn clone(&self) -> Self {
        Chaos(std::marker::PhantomData)
    }
}

/// What the stand-in declares: nothing.
#[derive(Debug, Clone, Copy)]
pub struct ChaosOff;

impl Register for Chaos {
    const KIND: &'static str = "chaos";
    type Settings = ChaosOff;
    const NONE: ChaosOff = ChaosOff;
    type Handle = Chaos;
    fn register(_name: &'static str, _settings: ChaosOff) -> Chaos {
        Chaos(std::marker::PhantomData)
    }
}

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
#[derive(Debug)]
pub struct NoInjection;

impl NoInjection {
    /// The body itself.
    #[inline]
    pub fn run<F>(&self, body: F) -> F {
        body
    }

    /// The breaker's own record of the outcome.
    #[inline]
    pub fn observe<T, E>(
        &self,
        breaker: &Breaker,
        ran: Result<Result<T, E>, DeadlineExceeded>,
    ) -> Result<T, CallError<E>> {
        breaker.observe(ran)
    }
}

impl<F> Chaos<F> {
    /// Does not compile without the `chaos` feature, with a message saying how to turn it on.
    pub fn draw(&self, _breaker: Option<&Breaker>) -> Result<NoInjection, ResilienceError>
    where
        F: ChaosFeature,
    {
        Ok(NoInjection)
    }
}
