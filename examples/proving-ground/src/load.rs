//! The open-loop load generator: Poisson arrivals at a set rate per class, each request sent
//! at its time whatever the earlier ones are doing (open loop: a slow service does not slow
//! the offered load), with a 1 s client timeout, over a pooled hyper client.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng as _};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::client::hyper_client;
use crate::model::{CLIENT_TIMEOUT, Class, Record, TIMED_OUT, TRANSPORT_ERROR};

/// Load of one class at one rate over a span of the scenario.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    /// The class (its route).
    pub class: Class,
    /// From, in milliseconds from t = 0 (negative: the warm-up).
    pub start_ms: f64,
    /// To.
    pub end_ms: f64,
    /// Requests per second.
    pub rps: f64,
}

/// What the generator is told to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The service, `http://127.0.0.1:PORT`.
    pub target: String,
    /// t = 0, Unix milliseconds.
    pub epoch_unix_ms: u64,
    /// The load.
    pub segments: Vec<Segment>,
    /// The arrivals' seed: every contender of a scenario sees the same arrivals.
    pub seed: u64,
}

/// What the generator reports.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LoadReport {
    /// Every request, in the order sent.
    pub records: Vec<Record>,
    /// Requests planned.
    pub planned: usize,
    /// How late the generator sent requests behind their planned times, in milliseconds: the
    /// mean and the worst (a late generator is the bottleneck, not the service).
    pub mean_lag_ms: f64,
    /// See `mean_lag_ms`.
    pub max_lag_ms: f64,
}

/// A Poisson process's arrival times in `[start_ms, end_ms)` at `rps`: exponential gaps of
/// mean `1000 / rps` ms.
pub fn arrivals(rng: &mut StdRng, rps: f64, start_ms: f64, end_ms: f64) -> Vec<f64> {
    let mut times = Vec::new();
    if rps <= 0.0 || end_ms <= start_ms {
        return times;
    }
    let mean_gap_ms = 1000.0 / rps;
    let mut t = start_ms;
    loop {
        // 1 - U is in (0, 1]: its logarithm is finite.
        let u: f64 = 1.0 - rng.random::<f64>();
        t += -u.ln() * mean_gap_ms;
        if t >= end_ms {
            return times;
        }
        times.push(t);
    }
}

/// Every arrival of a plan, in time order, with its class.
pub fn schedule(plan: &Plan) -> Vec<(f64, Class)> {
    let mut rng = StdRng::seed_from_u64(plan.seed);
    let mut all: Vec<(f64, Class)> = plan
        .segments
        .iter()
        .flat_map(|s| {
            arrivals(&mut rng, s.rps, s.start_ms, s.end_ms)
                .into_iter()
                .map(move |t| (t, s.class))
        })
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    all
}

fn unix_now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// Runs a plan to its end and returns every request's record (waits for the last answers).
pub async fn run(plan: &Plan) -> LoadReport {
    let arrivals = schedule(plan);
    let client = hyper_client();
    // t = 0 on tokio's clock, from the wall clock's epoch.
    let now = Instant::now();
    let to_epoch_ms = plan.epoch_unix_ms as f64 - unix_now_ms();
    let epoch = if to_epoch_ms >= 0.0 {
        now + Duration::from_secs_f64(to_epoch_ms / 1000.0)
    } else {
        now.checked_sub(Duration::from_secs_f64(-to_epoch_ms / 1000.0))
            .unwrap_or(now)
    };
    let at = |ms: f64| {
        if ms >= 0.0 {
            epoch + Duration::from_secs_f64(ms / 1000.0)
        } else {
            epoch
                .checked_sub(Duration::from_secs_f64(-ms / 1000.0))
                .unwrap_or(epoch)
        }
    };
    let since_epoch_ms = |instant: Instant| {
        if instant >= epoch {
            instant.duration_since(epoch).as_secs_f64() * 1000.0
        } else {
            -(epoch.duration_since(instant).as_secs_f64() * 1000.0)
        }
    };
    let records = Arc::new(Mutex::new(Vec::with_capacity(arrivals.len())));
    let mut tasks = tokio::task::JoinSet::new();
    let (mut lag_sum, mut lag_max) = (0.0f64, 0.0f64);
    let base = plan.target.trim_end_matches('/').to_owned();
    let uris: Vec<(Class, http::Uri)> = [Class::Critical, Class::Sheddable]
        .into_iter()
        .filter_map(|class| {
            format!("{base}{}", class.path())
                .parse()
                .ok()
                .map(|uri| (class, uri))
        })
        .collect();
    for &(t, class) in &arrivals {
        let due = at(t);
        if due > Instant::now() + Duration::from_micros(500) {
            tokio::time::sleep_until(due).await;
        }
        let sent = Instant::now();
        let lag = sent.saturating_duration_since(due).as_secs_f64() * 1000.0;
        lag_sum += lag;
        lag_max = lag_max.max(lag);
        let Some(uri) = uris
            .iter()
            .find(|(c, _)| *c == class)
            .map(|(_, u)| u.clone())
        else {
            continue;
        };
        let (client, records) = (client.clone(), records.clone());
        let sent_ms = since_epoch_ms(sent);
        tasks.spawn(async move {
            let request = http::Request::get(uri).body(Full::new(Bytes::new()));
            let (status, why) = match request {
                Err(_) => (TRANSPORT_ERROR, None),
                Ok(request) => {
                    let exchange = async {
                        let response = client.request(request).await.ok()?;
                        let status = response.status().as_u16();
                        let why = response
                            .headers()
                            .get(crate::contenders::WHY_HEADER)
                            .and_then(|v| v.to_str().ok())
                            .map(|v| v.chars().take(40).collect::<String>());
                        response.into_body().collect().await.ok()?;
                        Some((status, why))
                    };
                    match tokio::time::timeout(CLIENT_TIMEOUT, exchange).await {
                        Ok(Some(answer)) => answer,
                        Ok(None) => (TRANSPORT_ERROR, None),
                        Err(_) => (TIMED_OUT, None),
                    }
                }
            };
            let why = match status {
                200..=299 => None,
                TIMED_OUT => Some("client_timeout".to_owned()),
                TRANSPORT_ERROR => Some("transport".to_owned()),
                // The DeadlineLayer's own answer: the request's deadline passed first.
                504 if why.is_none() => Some("request_deadline".to_owned()),
                _ => why.or_else(|| Some(format!("status_{status}"))),
            };
            let record = Record {
                sent_ms,
                latency_ms: sent.elapsed().as_secs_f64() * 1000.0,
                status,
                class,
                why,
            };
            records
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(record);
        });
        // Reap finished tasks as we go, so the set stays as large as what is in flight.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    let mut records = std::mem::take(&mut *records.lock().unwrap_or_else(PoisonError::into_inner));
    records.sort_by(|a, b| a.sent_ms.total_cmp(&b.sent_ms));
    LoadReport {
        records,
        planned: arrivals.len(),
        mean_lag_ms: if arrivals.is_empty() {
            0.0
        } else {
            lag_sum / arrivals.len() as f64
        },
        max_lag_ms: lag_max,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_arrivals_have_the_mean_rate_and_exponential_gaps() {
        let mut rng = StdRng::seed_from_u64(7);
        // 700/s for 100 s: 70,000 expected, standard deviation sqrt(70,000) = 265.
        let times = arrivals(&mut rng, 700.0, 0.0, 100_000.0);
        let n = times.len() as f64;
        assert!((n - 70_000.0).abs() < 4.0 * 265.0, "{n} arrivals");
        assert!(times.windows(2).all(|w| w[0] <= w[1]));
        assert!(times.iter().all(|&t| (0.0..100_000.0).contains(&t)));
        // Exponential gaps: the share longer than the mean is e^-1 (0.368), not a half.
        let gaps: Vec<f64> = times.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = 1000.0 / 700.0;
        let longer = gaps.iter().filter(|&&g| g > mean).count() as f64 / gaps.len() as f64;
        assert!((longer - (-1.0f64).exp()).abs() < 0.01, "{longer}");
    }

    #[test]
    fn a_schedule_merges_classes_in_time_order_and_is_seeded() {
        let plan = Plan {
            target: "http://127.0.0.1:1".into(),
            epoch_unix_ms: 0,
            segments: vec![
                Segment {
                    class: Class::Critical,
                    start_ms: -500.0,
                    end_ms: 2_000.0,
                    rps: 400.0,
                },
                Segment {
                    class: Class::Sheddable,
                    start_ms: 1_000.0,
                    end_ms: 2_000.0,
                    rps: 800.0,
                },
            ],
            seed: 3,
        };
        let a = schedule(&plan);
        assert_eq!(a, schedule(&plan), "the same seed gives the same arrivals");
        assert!(a.windows(2).all(|w| w[0].0 <= w[1].0));
        let sheddable: Vec<f64> = a
            .iter()
            .filter(|(_, c)| *c == Class::Sheddable)
            .map(|(t, _)| *t)
            .collect();
        assert!(sheddable.iter().all(|&t| t >= 1_000.0));
        assert!((sheddable.len() as f64 - 800.0).abs() < 4.0 * 800f64.sqrt());
        assert!(
            a.iter().any(|(t, _)| *t < 0.0),
            "the warm-up is scheduled too"
        );
    }

    #[test]
    fn no_rate_or_no_span_is_no_arrivals() {
        let mut rng = StdRng::seed_from_u64(1);
        assert!(arrivals(&mut rng, 0.0, 0.0, 1_000.0).is_empty());
        assert!(arrivals(&mut rng, 100.0, 1_000.0, 1_000.0).is_empty());
    }
}
