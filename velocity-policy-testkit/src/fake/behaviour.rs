//! What a fake dependency does with a call: [`Behaviour`], and the phases of a [`Script`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

/// How a fake dependency answers. Switch it while the dependency runs with
/// [`FakeDependency::set`](super::FakeDependency::set); a call already waiting keeps the
/// behaviour it started with.
#[derive(Debug, Clone, PartialEq)]
pub enum Behaviour {
    /// Answers after `latency`, or after the dependency's usual latency when `None`
    /// ([`FakeDependency::with_latency`](super::FakeDependency::with_latency)).
    Healthy {
        /// How long each answer takes; `None` is the dependency's usual latency.
        latency: Option<Duration>,
    },
    /// Answers after a delay between `min` and `max` (both included; a fixed delay when they
    /// are equal). The delay of each call is drawn from the call's number, so a run repeats
    /// exactly.
    Slow {
        /// The shortest delay.
        min: Duration,
        /// The longest delay.
        max: Duration,
    },
    /// Fails every call at once: [`FakeError::Down`](super::FakeError::Down), a 503 over HTTP.
    Down,
    /// Refuses every call at once with a `Retry-After`:
    /// [`FakeError::RateLimited`](super::FakeError::RateLimited), a 429 over HTTP.
    RateLimited {
        /// How long the caller is told to wait.
        retry_after: Duration,
    },
    /// Fails a share of the calls (as [`Behaviour::Down`] does) and answers the rest as
    /// [`Behaviour::Healthy`] with the usual latency. Which calls fail depends only on `seed`
    /// and each call's number since the behaviour was set, so a test that fixes the seed sees
    /// the same calls fail on every run.
    Flaky {
        /// The share of calls that fail, from 0.0 (none) to 1.0 (all).
        failure_rate: f64,
        /// Chooses which calls fail.
        seed: u64,
    },
    /// Phases one after another: see [`Script`].
    Script(Script),
}

impl Behaviour {
    /// Answers after the dependency's usual latency.
    #[must_use]
    pub const fn healthy() -> Self {
        Self::Healthy { latency: None }
    }

    /// Answers after `latency`.
    #[must_use]
    pub const fn healthy_after(latency: Duration) -> Self {
        Self::Healthy {
            latency: Some(latency),
        }
    }

    /// Answers after `delay`, every call.
    #[must_use]
    pub const fn slow(delay: Duration) -> Self {
        Self::Slow {
            min: delay,
            max: delay,
        }
    }

    /// Answers after a delay between `min` and `max`, drawn per call (reproducibly).
    #[must_use]
    pub fn slow_between(min: Duration, max: Duration) -> Self {
        Self::Slow {
            min: min.min(max),
            max: max.max(min),
        }
    }

    /// Fails every call at once (a 503 over HTTP).
    #[must_use]
    pub const fn down() -> Self {
        Self::Down
    }

    /// Refuses every call at once, telling the caller to retry after `retry_after` (a 429 with
    /// a `Retry-After` header over HTTP, in whole seconds rounded up).
    #[must_use]
    pub const fn rate_limited(retry_after: Duration) -> Self {
        Self::RateLimited { retry_after }
    }

    /// Fails `failure_rate` of the calls (clamped to 0.0..=1.0), chosen by `seed`.
    #[must_use]
    pub fn flaky(failure_rate: f64, seed: u64) -> Self {
        let failure_rate = if failure_rate.is_nan() {
            0.0
        } else {
            failure_rate.clamp(0.0, 1.0)
        };
        Self::Flaky { failure_rate, seed }
    }

    /// The phases, one after another ([`Script`]).
    #[must_use]
    pub fn script(phases: impl IntoIterator<Item = Phase>) -> Self {
        Self::Script(Script::new(phases))
    }

    /// Parses the text `POST /_mode` takes: `healthy`, `healthy 10ms`, `slow 800ms`,
    /// `slow 100ms..300ms`, `down` (or `failing`, `503`), `429 5s` (or `rate_limited 5s`) and
    /// `flaky 30%` (or `flaky 0.3`, and optionally `seed 7`). A duration is whole `ms` or `s`
    /// (a bare number is milliseconds).
    ///
    /// ```
    /// use std::time::Duration;
    /// use velocity_policy_testkit::fake::Behaviour;
    ///
    /// assert_eq!(Behaviour::parse("slow 800ms"), Ok(Behaviour::slow(Duration::from_millis(800))));
    /// assert_eq!(Behaviour::parse("429 5s"), Ok(Behaviour::rate_limited(Duration::from_secs(5))));
    /// assert_eq!(Behaviour::parse("flaky 25% seed 3"), Ok(Behaviour::flaky(0.25, 3)));
    /// assert!(Behaviour::parse("sideways").unwrap_err().contains("unknown behaviour"));
    /// ```
    ///
    /// # Errors
    ///
    /// A message naming the word that does not parse and what would.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut words = text.split_whitespace();
        let mode = words.next().unwrap_or_default();
        let arg = words.next();
        let rest: Vec<&str> = words.collect();
        let needs = |what: &str| format!("`{mode}` needs {what}");
        match mode {
            "healthy" => match arg {
                None => Ok(Self::healthy()),
                Some(arg) => Ok(Self::healthy_after(parse_duration(arg)?)),
            },
            "slow" => {
                let arg = arg.ok_or_else(|| needs("a duration, such as `800ms`"))?;
                match arg.split_once("..") {
                    Some((min, max)) => Ok(Self::slow_between(
                        parse_duration(min)?,
                        parse_duration(max)?,
                    )),
                    None => Ok(Self::slow(parse_duration(arg)?)),
                }
            }
            "down" | "failing" | "503" => Ok(Self::Down),
            "429" | "rate_limited" => {
                let arg = arg.ok_or_else(|| needs("a duration, such as `5s`"))?;
                Ok(Self::rate_limited(parse_duration(arg)?))
            }
            "flaky" => {
                let arg = arg.ok_or_else(|| needs("a rate, such as `30%` or `0.3`"))?;
                let rate = match arg.strip_suffix('%') {
                    Some(percent) => percent.parse::<f64>().map(|p| p / 100.0),
                    None => arg.parse::<f64>(),
                }
                .map_err(|_| format!("`{arg}` is not a rate such as `30%` or `0.3`"))?;
                if !(0.0..=1.0).contains(&rate) {
                    return Err(format!("`{arg}` is not a rate between 0% and 100%"));
                }
                let seed = match rest.as_slice() {
                    [] => 0,
                    ["seed", seed] => seed
                        .parse()
                        .map_err(|_| format!("`{seed}` is not a seed: use a whole number"))?,
                    _ => return Err(format!("after `flaky {arg}` only `seed N` may follow")),
                };
                Ok(Self::flaky(rate, seed))
            }
            other => Err(format!(
                "unknown behaviour `{other}`: use `healthy`, `slow 800ms`, `slow 100ms..300ms`, \
                 `down`, `429 5s` or `flaky 30%`"
            )),
        }
    }
}

/// `800ms`, `5s`, or a bare number of milliseconds.
fn parse_duration(arg: &str) -> Result<Duration, String> {
    let (digits, unit) = arg
        .find(|c: char| !c.is_ascii_digit())
        .map_or((arg, "ms"), |at| arg.split_at(at));
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{arg}` is not a duration such as `800ms` or `5s`"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        other => Err(format!(
            "unknown unit `{other}` in `{arg}`: use `ms` or `s`"
        )),
    }
}

impl fmt::Display for Behaviour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Healthy { latency: None } => f.write_str("healthy"),
            Self::Healthy {
                latency: Some(latency),
            } => write!(f, "healthy ({} ms)", latency.as_millis()),
            Self::Slow { min, max } if min == max => write!(f, "slow ({} ms)", min.as_millis()),
            Self::Slow { min, max } => {
                write!(f, "slow ({} to {} ms)", min.as_millis(), max.as_millis())
            }
            Self::Down => f.write_str("down (503)"),
            Self::RateLimited { retry_after } => {
                write!(f, "429, Retry-After: {}", whole_seconds(*retry_after))
            }
            Self::Flaky { failure_rate, seed } => {
                write!(f, "flaky ({}% fail, seed {seed})", failure_rate * 100.0)
            }
            Self::Script(script) => {
                f.write_str("script: ")?;
                for (n, phase) in script.phases.iter().enumerate() {
                    if n > 0 {
                        f.write_str(", then ")?;
                    }
                    write!(f, "{}", phase.behaviour)?;
                    match phase.lasts {
                        Lasts::Calls(calls) => write!(f, " for {calls} calls")?,
                        Lasts::For(time) => write!(f, " for {} ms", time.as_millis())?,
                        Lasts::Forever => {}
                    }
                }
                Ok(())
            }
        }
    }
}

/// `retry_after` in the whole seconds a `Retry-After` header carries: rounded up, at least 1.
pub(crate) fn whole_seconds(retry_after: Duration) -> u64 {
    let secs = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
    secs.max(1)
}

/// How long a [`Phase`] lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lasts {
    /// So many calls.
    Calls(u64),
    /// So long, on tokio's clock (so a paused clock's `advance` moves it). The first phase's
    /// time starts when the script is set; a later phase's when the phase before it ends: at
    /// the end of that phase's time, or at the call that found its calls used up.
    For(Duration),
    /// For ever: phases after it never run.
    Forever,
}

/// One phase of a [`Script`]: a behaviour for so many calls or so long.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    /// What the dependency does during the phase. A script inside a script is run as its
    /// phases, in its place (the outer phase's length is then not used).
    pub behaviour: Behaviour,
    /// How long the phase lasts.
    pub lasts: Lasts,
}

impl Phase {
    /// `behaviour` for the next `calls` calls.
    #[must_use]
    pub const fn calls(calls: u64, behaviour: Behaviour) -> Self {
        Self {
            behaviour,
            lasts: Lasts::Calls(calls),
        }
    }

    /// `behaviour` for `time` on tokio's clock.
    #[must_use]
    pub const fn lasting(time: Duration, behaviour: Behaviour) -> Self {
        Self {
            behaviour,
            lasts: Lasts::For(time),
        }
    }

    /// `behaviour` from then on.
    #[must_use]
    pub const fn forever(behaviour: Behaviour) -> Self {
        Self {
            behaviour,
            lasts: Lasts::Forever,
        }
    }
}

/// A sequence of phases: "healthy for 10 calls, then down for 5 s, then healthy". When the last
/// phase ends, its behaviour stays.
///
/// ```
/// use std::time::Duration;
/// use velocity_policy_testkit::fake::{Behaviour, Phase};
///
/// let outage = Behaviour::script([
///     Phase::calls(10, Behaviour::healthy()),
///     Phase::lasting(Duration::from_secs(5), Behaviour::down()),
///     Phase::forever(Behaviour::healthy()),
/// ]);
/// assert_eq!(
///     outage.to_string(),
///     "script: healthy for 10 calls, then down (503) for 5000 ms, then healthy"
/// );
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    phases: Arc<[Phase]>,
}

impl Script {
    /// The phases in order; a script inside is replaced by its own phases.
    #[must_use]
    pub fn new(phases: impl IntoIterator<Item = Phase>) -> Self {
        let mut flat = Vec::new();
        for phase in phases {
            match phase.behaviour {
                Behaviour::Script(inner) => flat.extend(inner.phases.iter().cloned()),
                _ => flat.push(phase),
            }
        }
        Self {
            phases: flat.into(),
        }
    }

    /// Its phases.
    #[must_use]
    pub fn phases(&self) -> &[Phase] {
        &self.phases
    }
}

/// What one call does: wait, then answer or fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Answer after this long.
    Answer(Duration),
    /// Fail at once (down).
    Fail,
    /// Refuse at once with this `Retry-After`.
    RateLimited(Duration),
}

/// Where a running behaviour is: the calls it took since it was set, and its script's phase.
#[derive(Debug)]
pub(crate) struct Running {
    behaviour: Behaviour,
    calls: u64,
    phase: usize,
    phase_calls: u64,
    phase_started: Instant,
}

impl Running {
    pub(crate) fn new(behaviour: Behaviour) -> Self {
        Self {
            behaviour,
            calls: 0,
            phase: 0,
            phase_calls: 0,
            phase_started: Instant::now(),
        }
    }

    pub(crate) fn behaviour(&self) -> &Behaviour {
        &self.behaviour
    }

    /// The next call's decision, at `now`.
    pub(crate) fn decide(&mut self, now: Instant, usual: Duration) -> Decision {
        let n = self.calls;
        self.calls += 1;
        let Behaviour::Script(script) = &self.behaviour else {
            return decide_one(&self.behaviour, n, usual);
        };
        let phases = &script.phases;
        let Some(last) = phases.len().checked_sub(1) else {
            return Decision::Answer(usual);
        };
        while self.phase < last {
            let over = match phases[self.phase].lasts {
                Lasts::Calls(calls) => {
                    (self.phase_calls >= calls).then_some(now.max(self.phase_started))
                }
                Lasts::For(time) => {
                    let end = self.phase_started + time;
                    (now >= end).then_some(end)
                }
                Lasts::Forever => None,
            };
            let Some(next_start) = over else { break };
            self.phase += 1;
            self.phase_calls = 0;
            self.phase_started = next_start;
        }
        let k = self.phase_calls;
        self.phase_calls += 1;
        decide_one(&phases[self.phase].behaviour, k, usual)
    }
}

/// The decision of `behaviour` (not a script) for its call number `n`.
fn decide_one(behaviour: &Behaviour, n: u64, usual: Duration) -> Decision {
    match behaviour {
        Behaviour::Healthy { latency } => Decision::Answer(latency.unwrap_or(usual)),
        Behaviour::Slow { min, max } => {
            let spread = max.saturating_sub(*min);
            let spread_ns = u64::try_from(spread.as_nanos()).unwrap_or(u64::MAX);
            let extra = if spread_ns == 0 {
                0
            } else {
                // Inclusive of `max`: a draw in 0..=spread.
                mix(n ^ 0x5EED_51E3) % spread_ns.saturating_add(1)
            };
            Decision::Answer(*min + Duration::from_nanos(extra))
        }
        Behaviour::Down => Decision::Fail,
        Behaviour::RateLimited { retry_after } => Decision::RateLimited(*retry_after),
        Behaviour::Flaky { failure_rate, seed } => {
            if unit(mix(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ n)) < *failure_rate {
                Decision::Fail
            } else {
                Decision::Answer(usual)
            }
        }
        // Flattened by `Script::new`: a script never holds a script.
        Behaviour::Script(_) => Decision::Answer(usual),
    }
}

/// SplitMix64's finalizer: a well-spread 64-bit value from any input.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `x` as a share in `[0, 1)`, from its top 53 bits.
fn unit(x: u64) -> f64 {
    #[allow(
        clippy::cast_precision_loss,
        reason = "53 bits fit an f64's mantissa exactly"
    )]
    let share = (x >> 11) as f64 / (1u64 << 53) as f64;
    share
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_reads_every_behaviour_and_names_what_does_not_parse() {
        let ms = Duration::from_millis;
        assert_eq!(Behaviour::parse("healthy"), Ok(Behaviour::healthy()));
        assert_eq!(
            Behaviour::parse("healthy 10ms"),
            Ok(Behaviour::healthy_after(ms(10)))
        );
        assert_eq!(
            Behaviour::parse("slow 100ms..300ms"),
            Ok(Behaviour::slow_between(ms(100), ms(300)))
        );
        assert_eq!(Behaviour::parse("failing"), Ok(Behaviour::Down));
        assert_eq!(Behaviour::parse("503"), Ok(Behaviour::Down));
        assert_eq!(
            Behaviour::parse("rate_limited 2s"),
            Ok(Behaviour::rate_limited(Duration::from_secs(2)))
        );
        assert_eq!(Behaviour::parse("flaky 0.3"), Ok(Behaviour::flaky(0.3, 0)));
        assert!(
            Behaviour::parse("slow")
                .unwrap_err()
                .contains("needs a duration")
        );
        assert!(
            Behaviour::parse("slow 5m")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(
            Behaviour::parse("flaky 150%")
                .unwrap_err()
                .contains("between")
        );
        assert!(
            Behaviour::parse("flaky 10% salt 3")
                .unwrap_err()
                .contains("seed N")
        );
    }

    #[test]
    fn a_slow_range_stays_inside_its_bounds_and_repeats() {
        let ms = Duration::from_millis;
        let slow = Behaviour::slow_between(ms(100), ms(300));
        let draws: Vec<_> = (0..1000).map(|n| decide_one(&slow, n, ms(1))).collect();
        for draw in &draws {
            let Decision::Answer(delay) = draw else {
                panic!("{draw:?}")
            };
            assert!((ms(100)..=ms(300)).contains(delay), "{delay:?}");
        }
        let again: Vec<_> = (0..1000).map(|n| decide_one(&slow, n, ms(1))).collect();
        assert_eq!(draws, again);
        // Spread over the range, not all one value.
        let delays = || {
            draws.iter().map(|d| match d {
                Decision::Answer(delay) => *delay,
                _ => Duration::ZERO,
            })
        };
        assert!(delays().any(|d| d < ms(150)));
        assert!(delays().any(|d| d > ms(250)));
    }
}
