//! The phases: which dependency is sick and how, for how long, and the load that drives each
//! one (steady saves and reads, waves of saves in the burst, the second instance's saves while a
//! shared opening holds).

use std::time::Duration;

use tokio::time::MissedTickBehavior;

use super::Stage;
use super::load::Route;
use super::measure::progress_line;
use super::second::{Turn, Window};
use crate::providers::Mode;

/// Saves per second, in every phase.
pub const SAVE_RATE: f64 = 20.0;
/// Reads per second, in every phase.
pub const READ_RATE: f64 = 40.0;
/// Saves sent at once in each wave of the burst phase.
pub const BURST_WAVE: usize = 32;
/// How often a burst wave is sent.
pub const BURST_EVERY: Duration = Duration::from_millis(500);

/// One phase of the scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    /// A short name.
    pub name: &'static str,
    /// What is going on, in one line.
    pub story: &'static str,
    /// How long it lasts.
    pub duration: Duration,
    /// The search provider's behaviour.
    pub search: Mode,
    /// The notifier's behaviour.
    pub notifier: Mode,
    /// The session store's behaviour.
    pub sessions: Mode,
    /// Waves of saves above capacity on top of the steady load.
    pub burst: bool,
    /// With Redis: the second instance takes saves while the shared opening holds.
    pub second_instance: bool,
    /// The breaker this phase needs closed to show what it names: before it starts, the load
    /// pauses and every provider is healthy until that breaker's opening (from the phase before)
    /// has ended, so the phase's first calls reach the provider.
    pub after_cooldown_of: Option<&'static str>,
    /// The chaos drill switched on for the phase through the registry (its faults are injected,
    /// marked so, while the providers keep their modes), and off after it.
    pub chaos: Option<&'static str>,
}

/// The phases, in order.
pub fn phases(short: bool, redis: bool) -> Vec<Phase> {
    let duration = if short {
        Duration::from_millis(1500)
    } else {
        Duration::from_secs(8)
    };
    let phase = |name, story, search, sessions, burst| Phase {
        name,
        story,
        duration,
        search,
        notifier: Mode::Healthy,
        sessions,
        burst,
        second_instance: false,
        after_cooldown_of: None,
        chaos: None,
    };
    vec![
        phase(
            "healthy",
            "every dependency answers in a few milliseconds",
            Mode::Healthy,
            Mode::Healthy,
            false,
        ),
        phase(
            "search slow",
            "the search provider takes 600 ms per call",
            Mode::slow(Duration::from_millis(600)),
            Mode::Healthy,
            false,
        ),
        // The same sickness, injected: the provider is healthy and the `search_drill` chaos adds
        // 600 ms inside each attempt. The mechanisms see it as they saw the real one.
        Phase {
            chaos: Some("search_drill"),
            ..phase(
                "search slow (injected)",
                "the provider is healthy; the search_drill chaos injects 600 ms into every search call",
                Mode::Healthy,
                Mode::Healthy,
                false,
            )
        },
        Phase {
            second_instance: redis,
            // With a second instance, long enough in the short run for it to take saves while
            // the first instance's opening holds.
            duration: if redis {
                duration.max(Duration::from_secs(3))
            } else {
                duration
            },
            ..phase(
                "search down",
                "the search provider answers 503 to everything",
                Mode::Failing,
                Mode::Healthy,
                false,
            )
        },
        // The breaker `search down` opened is still open when that phase ends (its cooldown,
        // 3 s, outlasts a short phase): without the wait, this phase's calls would all be
        // refused and the provider's Retry-After never seen.
        Phase {
            after_cooldown_of: Some("search"),
            ..phase(
                "search 429",
                "the search provider answers 429 with Retry-After: 2",
                Mode::rate_limited(Duration::from_secs(2)),
                Mode::Healthy,
                false,
            )
        },
        phase(
            "burst",
            "waves of 32 saves at once, twice a second, on top of the steady load",
            Mode::Healthy,
            Mode::Healthy,
            true,
        ),
        phase(
            "sessions down",
            "the session store answers 503 to everything",
            Mode::Healthy,
            Mode::Failing,
            false,
        ),
        phase(
            "recovery",
            "every dependency is healthy again",
            Mode::Healthy,
            Mode::Healthy,
            false,
        ),
    ]
}

/// Drives one phase's load; returns the second instance's window, if it had one.
pub(super) async fn drive_phase(stage: &Stage<'_>, index: usize, phase: &Phase) -> Option<Window> {
    let load = stage.load;
    let base = stage.base;
    let started = load.t0.elapsed();
    let end = tokio::time::Instant::now() + phase.duration;
    let mut saves = tokio::time::interval(Duration::from_secs_f64(1.0 / SAVE_RATE));
    let mut reads = tokio::time::interval(Duration::from_secs_f64(1.0 / READ_RATE));
    let mut bursts = tokio::time::interval(BURST_EVERY);
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    let mut b_saves = tokio::time::interval(Duration::from_secs_f64(1.0 / SAVE_RATE));
    for interval in [
        &mut saves,
        &mut reads,
        &mut bursts,
        &mut ticks,
        &mut b_saves,
    ] {
        interval.set_missed_tick_behavior(MissedTickBehavior::Skip);
    }
    ticks.tick().await;
    let b = stage
        .second
        .map(|second| second.url.as_str())
        .filter(|_| phase.second_instance);
    let mut turn = Turn::default();
    loop {
        tokio::select! {
            // The end first: nothing is sent at the boundary into the next phase's fault.
            biased;
            _ = tokio::time::sleep_until(end) => break,
            _ = saves.tick() => load.save(base, "a", index, Route::Save),
            _ = reads.tick() => load.read(base, index),
            _ = bursts.tick(), if phase.burst => {
                for _ in 0..BURST_WAVE {
                    load.save(base, "a", index, Route::Save);
                }
            }
            _ = b_saves.tick(), if b.is_some() && !turn.is_over() => {
                if let Some(b) = b {
                    turn.tick(load, b, index, end, stage.providers);
                }
            }
            _ = ticks.tick(), if stage.progress => progress_line(load, index, stage.count, phase, started),
        }
    }
    turn.window(stage.providers)
}
