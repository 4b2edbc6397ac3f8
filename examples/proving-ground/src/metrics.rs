//! What a run's records say, computed: goodput, percentiles, amplification, wasted work,
//! recovery time, stuck, availability per class. Pure functions of the records, so every
//! number a reader sees comes from the run, never from a sentence with numbers filled in.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::{Class, Phases, Record};

/// The dependency's counts in one 100 ms bucket, its start in milliseconds from t = 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct DepBucket {
    /// The bucket's start, milliseconds from t = 0.
    pub start_ms: f64,
    /// Requests that arrived.
    pub received: u64,
    /// Of those, requests that carried a deadline.
    pub propagated: u64,
    /// Served to the end.
    pub completed: u64,
    /// Served after the caller had stopped waiting.
    pub wasted: u64,
    /// Dropped at the head of the queue, past their propagated deadline.
    pub dropped_expired: u64,
}

/// The value at percentile `p` (0 to 100) of `values`, nearest rank; `None` when empty.
pub fn percentile(values: &mut [f64], p: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
    Some(values[rank.clamp(1, values.len()) - 1])
}

/// Dependency requests per client request; `None` when no client request was sent.
pub fn amplification(dependency_received: u64, client_requests: usize) -> Option<f64> {
    (client_requests > 0).then(|| dependency_received as f64 / client_requests as f64)
}

/// Successful answers per bucket of `bucket_ms`, by the time they ended, from t = 0 to
/// `end_ms`.
pub fn successes_per_bucket(records: &[Record], bucket_ms: f64, end_ms: f64) -> Vec<u32> {
    let buckets = (end_ms / bucket_ms).ceil().max(0.0) as usize;
    let mut counts = vec![0u32; buckets];
    for record in records.iter().filter(|r| r.ok()) {
        let ended = record.ended_ms();
        if ended >= 0.0
            && let Some(count) = counts.get_mut((ended / bucket_ms) as usize)
        {
            *count += 1;
        }
    }
    counts
}

/// Goodput (successes per second) over the `window` buckets ending with bucket `last`
/// (inclusive); buckets before t = 0 count as none.
pub fn rolling_goodput(counts: &[u32], bucket_ms: f64, last: usize, window: usize) -> f64 {
    let from = (last + 1).saturating_sub(window);
    let sum: u32 = counts[from..=last.min(counts.len().saturating_sub(1))]
        .iter()
        .sum();
    sum as f64 / (window as f64 * bucket_ms / 1000.0)
}

/// Seconds from `fault_end_ms` until the rolling goodput over `window_ms` is back to `share`
/// of `baseline` (successes per second): 0 when it never fell below; `None` when it is not
/// back by the end of the counts.
pub fn recovery_s(
    counts: &[u32],
    bucket_ms: f64,
    fault_end_ms: f64,
    window_ms: f64,
    baseline: f64,
    share: f64,
) -> Option<f64> {
    let window = (window_ms / bucket_ms).round().max(1.0) as usize;
    let first = ((fault_end_ms / bucket_ms).round() as usize).checked_sub(1)?;
    (first..counts.len())
        .find(|&last| rolling_goodput(counts, bucket_ms, last, window) >= share * baseline)
        .map(|last| (((last + 1) as f64 * bucket_ms - fault_end_ms) / 1000.0).max(0.0))
}

/// Whether the rolling goodput over `window_ms` ending at `at_ms` is under half of
/// `baseline`; `None` when `at_ms` is past the counts.
pub fn stuck(
    counts: &[u32],
    bucket_ms: f64,
    at_ms: f64,
    window_ms: f64,
    baseline: f64,
) -> Option<bool> {
    let window = (window_ms / bucket_ms).round().max(1.0) as usize;
    let last = ((at_ms / bucket_ms).round() as usize).checked_sub(1)?;
    (last < counts.len()).then(|| rolling_goodput(counts, bucket_ms, last, window) < 0.5 * baseline)
}

/// One phase of one contender's run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PhaseStats {
    /// Requests the generator sent in the phase.
    pub sent: usize,
    /// Requests per second it sent (to compare with the target).
    pub sent_rps: f64,
    /// Requests per second it was asked to send.
    pub target_rps: f64,
    /// Successful answers per second, by when they ended.
    pub goodput_rps: f64,
    /// Successful answers among the requests sent in the phase.
    pub success_share: Option<f64>,
    /// Median latency of the successes sent in the phase, ms.
    pub p50_ms: Option<f64>,
    /// 99th percentile of the same, ms.
    pub p99_ms: Option<f64>,
    /// Critical requests answered successfully, of those sent in the phase.
    pub critical_availability: Option<f64>,
    /// Sheddable requests answered successfully, of those sent in the phase.
    pub sheddable_availability: Option<f64>,
    /// Requests the dependency received in the phase.
    pub dependency_received: u64,
    /// Of those, requests that carried a propagated deadline.
    pub dependency_propagated: u64,
    /// Calls it served to the end.
    pub dependency_completed: u64,
    /// Of those, served after the caller had stopped waiting.
    pub wasted: u64,
    /// Dropped at the head of its queue, their propagated deadline past.
    pub dropped_expired: u64,
    /// Dependency requests per client request.
    pub amplification: Option<f64>,
    /// The failures of the requests sent in the phase, by what ended them (the service's
    /// code: which mechanism refused, or what the dependency answered).
    pub failures: BTreeMap<String, u64>,
}

/// Computes a phase `[from_ms, to_ms)`.
pub fn phase(
    records: &[Record],
    dependency: &[DepBucket],
    from_ms: f64,
    to_ms: f64,
    target_rps: f64,
) -> PhaseStats {
    let seconds = (to_ms - from_ms) / 1000.0;
    let sent: Vec<&Record> = records
        .iter()
        .filter(|r| (from_ms..to_ms).contains(&r.sent_ms))
        .collect();
    let ended_ok = records
        .iter()
        .filter(|r| r.ok() && (from_ms..to_ms).contains(&r.ended_ms()))
        .count();
    let mut ok_latencies: Vec<f64> = sent
        .iter()
        .filter(|r| r.ok())
        .map(|r| r.latency_ms)
        .collect();
    let availability = |class: Class| {
        let of_class: Vec<&&Record> = sent.iter().filter(|r| r.class == class).collect();
        (!of_class.is_empty())
            .then(|| of_class.iter().filter(|r| r.ok()).count() as f64 / of_class.len() as f64)
    };
    let in_phase = dependency
        .iter()
        .filter(|b| (from_ms..to_ms).contains(&b.start_ms));
    let (mut received, mut propagated, mut completed, mut wasted, mut dropped) = (0, 0, 0, 0, 0);
    for b in in_phase {
        received += b.received;
        propagated += b.propagated;
        completed += b.completed;
        wasted += b.wasted;
        dropped += b.dropped_expired;
    }
    let mut failures = BTreeMap::new();
    for record in sent.iter().filter(|r| !r.ok()) {
        let why = record
            .why
            .clone()
            .unwrap_or_else(|| format!("status_{}", record.status));
        *failures.entry(why).or_insert(0) += 1;
    }
    PhaseStats {
        failures,
        sent: sent.len(),
        sent_rps: sent.len() as f64 / seconds,
        target_rps,
        goodput_rps: ended_ok as f64 / seconds,
        success_share: (!sent.is_empty()).then(|| ok_latencies.len() as f64 / sent.len() as f64),
        p50_ms: percentile(&mut ok_latencies, 50.0),
        p99_ms: percentile(&mut ok_latencies, 99.0),
        critical_availability: availability(Class::Critical),
        sheddable_availability: availability(Class::Sheddable),
        dependency_received: received,
        dependency_propagated: propagated,
        dependency_completed: completed,
        wasted,
        dropped_expired: dropped,
        amplification: amplification(received, sent.len()),
    }
}

/// The resolution of the goodput series and of the recovery computation.
pub const BUCKET_MS: f64 = 100.0;

/// One contender's run of one scenario, measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Measurement {
    /// The healthy baseline.
    pub baseline: PhaseStats,
    /// The fault.
    pub fault: PhaseStats,
    /// After the fault cleared.
    pub after: PhaseStats,
    /// The whole measured run.
    pub overall: PhaseStats,
    /// Seconds from the fault's end until the rolling goodput is back to 95% of the baseline;
    /// `None`: not by the end of the run.
    pub recovery_s: Option<f64>,
    /// The rolling window of the recovery and stuck rules, seconds.
    pub window_s: f64,
    /// When stuck is judged, seconds after the fault's end.
    pub stuck_at_s: f64,
    /// Goodput under half the baseline at `stuck_at_s`.
    pub stuck: Option<bool>,
    /// Goodput per half second from t = 0, for the chart.
    pub series: Vec<f64>,
}

/// Measures one run. The rolling window is 3 s (shorter when the phases are: `--quick`), and
/// stuck is judged 20 s after the fault ended (or at the run's end, when sooner).
pub fn measure(
    records: &[Record],
    dependency: &[DepBucket],
    phases: &Phases,
    critical_rps: f64,
    sheddable_rps: f64,
) -> Measurement {
    let ms = |s: f64| s * 1000.0;
    let (fault_start, fault_end, end) = (
        ms(phases.fault_start()),
        ms(phases.fault_end()),
        ms(phases.end()),
    );
    let baseline = phase(records, dependency, 0.0, fault_start, critical_rps);
    let fault = phase(
        records,
        dependency,
        fault_start,
        fault_end,
        critical_rps + sheddable_rps,
    );
    let after = phase(records, dependency, fault_end, end, critical_rps);
    let mut overall = phase(records, dependency, 0.0, end, critical_rps);
    overall.target_rps = (baseline.target_rps * phases.baseline_s
        + fault.target_rps * phases.fault_s
        + after.target_rps * phases.after_s)
        / phases.end();
    let counts = successes_per_bucket(records, BUCKET_MS, end);
    let window_s = 3.0f64.min(phases.baseline_s).min(phases.after_s);
    let stuck_at_s = 20.0f64.min(phases.after_s);
    let recovery_s = recovery_s(
        &counts,
        BUCKET_MS,
        fault_end,
        ms(window_s),
        baseline.goodput_rps,
        0.95,
    );
    let stuck = stuck(
        &counts,
        BUCKET_MS,
        fault_end + ms(stuck_at_s),
        ms(window_s),
        baseline.goodput_rps,
    );
    let series = counts
        .chunks(5)
        .map(|c| c.iter().sum::<u32>() as f64 / (c.len() as f64 * BUCKET_MS / 1000.0))
        .collect();
    Measurement {
        baseline,
        fault,
        after,
        overall,
        recovery_s,
        window_s,
        stuck_at_s,
        stuck,
        series,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TIMED_OUT;

    fn ok(sent_ms: f64, latency_ms: f64) -> Record {
        Record {
            sent_ms,
            latency_ms,
            status: 200,
            class: Class::Critical,
            why: None,
        }
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut values: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(percentile(&mut values, 50.0), Some(50.0));
        assert_eq!(percentile(&mut values, 99.0), Some(99.0));
        assert_eq!(percentile(&mut values, 100.0), Some(100.0));
        assert_eq!(percentile(&mut [7.0], 99.0), Some(7.0));
        assert_eq!(percentile(&mut [], 50.0), None);
        let mut two = [10.0, 20.0];
        assert_eq!(percentile(&mut two, 50.0), Some(10.0));
        assert_eq!(percentile(&mut two, 51.0), Some(20.0));
    }

    #[test]
    fn amplification_is_dependency_requests_per_client_request() {
        assert_eq!(amplification(300, 100), Some(3.0));
        assert_eq!(amplification(0, 100), Some(0.0));
        assert_eq!(amplification(5, 0), None);
    }

    /// 100 successes a second (ten per 100 ms bucket), none during `[gap_from, gap_to)` s,
    /// over `end_s` seconds.
    fn counts_with_gap(gap_from: usize, gap_to: usize, end_s: usize) -> Vec<u32> {
        (0..end_s * 10)
            .map(|b| {
                if (gap_from * 10..gap_to * 10).contains(&b) {
                    0
                } else {
                    10
                }
            })
            .collect()
    }

    #[test]
    fn recovery_waits_for_the_window_to_hold_baseline_goodput() {
        // Nothing from 10 s to 20 s, back at once at 20 s: the 3 s window ending 3 s later is
        // the first wholly after the fault...
        let counts = counts_with_gap(10, 20, 40);
        assert_eq!(
            recovery_s(&counts, 100.0, 20_000.0, 3_000.0, 100.0, 1.0),
            Some(3.0)
        );
        // ...and at 95% one ending 2.9 s later (2.9 s of goodput in 3 s is 96.7%) is enough.
        assert_eq!(
            recovery_s(&counts, 100.0, 20_000.0, 3_000.0, 100.0, 0.95),
            Some(2.9)
        );
        // Back only at 25 s: 5 s more.
        let counts = counts_with_gap(10, 25, 40);
        assert_eq!(
            recovery_s(&counts, 100.0, 20_000.0, 3_000.0, 100.0, 0.95),
            Some(7.9)
        );
    }

    #[test]
    fn recovery_is_zero_when_the_fault_cost_nothing_and_none_when_it_never_comes_back() {
        let healthy = counts_with_gap(0, 0, 40);
        assert_eq!(
            recovery_s(&healthy, 100.0, 20_000.0, 3_000.0, 100.0, 0.95),
            Some(0.0)
        );
        let collapsed = counts_with_gap(10, 40, 40);
        assert_eq!(
            recovery_s(&collapsed, 100.0, 20_000.0, 3_000.0, 100.0, 0.95),
            None
        );
    }

    #[test]
    fn stuck_is_under_half_the_baseline_twenty_seconds_after() {
        let collapsed = counts_with_gap(10, 42, 42);
        assert_eq!(
            stuck(&collapsed, 100.0, 40_000.0, 3_000.0, 100.0),
            Some(true)
        );
        // Half the baseline exactly is not stuck.
        let half: Vec<u32> = (0..420).map(|b| if b < 100 { 10 } else { 5 }).collect();
        assert_eq!(stuck(&half, 100.0, 40_000.0, 3_000.0, 100.0), Some(false));
        let recovered = counts_with_gap(10, 25, 42);
        assert_eq!(
            stuck(&recovered, 100.0, 40_000.0, 3_000.0, 100.0),
            Some(false)
        );
        // Not measurable past the run.
        assert_eq!(stuck(&recovered, 100.0, 50_000.0, 3_000.0, 100.0), None);
    }

    #[test]
    fn a_phase_counts_by_send_time_and_goodput_by_end_time() {
        let records = vec![
            ok(100.0, 10.0),
            ok(900.0, 200.0), // sent in the phase, ends after it
            Record {
                sent_ms: 500.0,
                latency_ms: 1_000.0,
                status: TIMED_OUT,
                class: Class::Critical,
                why: Some("client_timeout".into()),
            },
            Record {
                sent_ms: 600.0,
                latency_ms: 5.0,
                status: 503,
                class: Class::Sheddable,
                why: None,
            },
            ok(-50.0, 100.0), // the warm-up's, ends in the phase
        ];
        let dependency = [
            DepBucket {
                start_ms: 0.0,
                received: 6,
                propagated: 4,
                completed: 3,
                wasted: 1,
                dropped_expired: 2,
            },
            DepBucket {
                start_ms: 1_000.0,
                received: 50,
                ..DepBucket::default()
            },
        ];
        let p = phase(&records, &dependency, 0.0, 1_000.0, 4.0);
        assert_eq!(p.sent, 4);
        assert_eq!(
            p.goodput_rps, 2.0,
            "the warm-up's success and the first end in it"
        );
        assert_eq!(p.success_share, Some(0.5));
        assert_eq!(p.p50_ms, Some(10.0));
        assert_eq!(p.p99_ms, Some(200.0));
        assert_eq!(p.critical_availability, Some(2.0 / 3.0));
        assert_eq!(p.sheddable_availability, Some(0.0));
        assert_eq!(
            (p.dependency_received, p.wasted, p.dropped_expired),
            (6, 1, 2)
        );
        assert_eq!(p.amplification, Some(1.5));
        assert_eq!(p.dependency_propagated, 4);
        let failures: Vec<(&str, u64)> = p.failures.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(failures, [("client_timeout", 1), ("status_503", 1)]);
    }
}
