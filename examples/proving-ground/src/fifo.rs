//! The dependency's core, without HTTP: `slots` calls served at once in a service time, an
//! unbounded FIFO in front, and a mode switched at run time.
//!
//! Two rules make it the dependency the issue asks for. It never abandons work: a queued
//! call is served even when its caller has gone (that is what makes a collapse sustain
//! itself). But it drops, when the call reaches the head of the queue, work whose
//! *propagated* deadline has passed, as a server behind this engine's `DeadlineLayer` would
//! (nobody can use the answer). A completion after the caller stopped waiting is counted as
//! wasted work; the caller's wait is its propagated deadline or, for a caller that propagates
//! none, the attempt timeout it declares for accounting only, else the client's 1 s.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::model::{Control, Mode};

/// Counts per 100 ms of wall-clock time (so the orchestrator can line them up with the load
/// generator's records), and in total.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Requests that arrived, in any mode.
    pub received: u64,
    /// Of those, requests that carried a deadline (`x-deadline-ms` or `grpc-timeout`).
    pub propagated: u64,
    /// Calls served to the end.
    pub completed: u64,
    /// Of those, completed after their caller had stopped waiting.
    pub wasted: u64,
    /// Queued calls dropped at the head of the queue because their propagated deadline had
    /// passed.
    pub dropped_expired: u64,
    /// Answered 503 or 429 at once.
    pub refused: u64,
    /// Never answered (blackhole).
    pub blackholed: u64,
}

/// One 100 ms bucket: its start in Unix milliseconds, and its counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Bucket {
    /// The bucket's start, Unix milliseconds (a multiple of 100).
    pub unix_ms: u64,
    /// What happened in it.
    pub counts: Counts,
}

/// What became of a submitted call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Served to the end.
    Done,
    /// Dropped at the head of the queue: its propagated deadline had passed.
    Expired,
}

/// What `submit` decided.
#[derive(Debug)]
pub enum Admission {
    /// Queued; the receiver resolves when it is served or dropped.
    Queued(oneshot::Receiver<Outcome>),
    /// Refused at once: answer as the mode says (503, or 429 with `Retry-After`).
    Refused(Mode),
    /// Never to be answered.
    Blackhole,
}

struct Job {
    /// When it arrived.
    arrived: Instant,
    /// The propagated deadline, if the caller sent one: dropped at the head past it.
    deadline: Option<Instant>,
    /// When the caller stops waiting: a completion after it is wasted.
    waited_until: Instant,
    reply: oneshot::Sender<Outcome>,
}

struct State {
    queue: VecDeque<Job>,
    busy: u32,
    slots: u32,
    mode: Mode,
}

struct Inner {
    state: Mutex<State>,
    service: Duration,
    timeline: Mutex<BTreeMap<u64, Counts>>,
    /// The wall clock at `origin`, in Unix milliseconds; buckets are computed from tokio's
    /// clock after it, so a paused clock drives them in tests.
    origin_unix_ms: u64,
    origin: Instant,
}

/// The dependency of limited capacity; cloning shares it.
#[derive(Clone)]
pub struct Capacity {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Capacity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self
            .inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Capacity")
            .field("slots", &state.slots)
            .field("busy", &state.busy)
            .field("queued", &state.queue.len())
            .field("mode", &state.mode)
            .finish()
    }
}

impl Capacity {
    /// `slots` calls at once, each in `service`; healthy. Buckets start at the wall clock's
    /// now.
    pub fn new(slots: u32, service: Duration) -> Self {
        let unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        Self::with_origin(slots, service, unix_ms)
    }

    /// As [`new`](Self::new), with buckets counted from `origin_unix_ms` at tokio's now.
    pub fn with_origin(slots: u32, service: Duration, origin_unix_ms: u64) -> Self {
        Self {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    busy: 0,
                    slots,
                    mode: Mode::Healthy,
                }),
                service,
                timeline: Mutex::new(BTreeMap::new()),
                origin_unix_ms,
                origin: Instant::now(),
            }),
        }
    }

    /// A call arrives, with the budget its caller propagated (if any) and the time its caller
    /// waits (for accounting only).
    pub fn submit(&self, propagated: Option<Duration>, waits: Duration) -> Admission {
        let now = Instant::now();
        self.count(|c| {
            c.received += 1;
            c.propagated += u64::from(propagated.is_some());
        });
        let mut state = self.lock();
        match state.mode {
            Mode::Down | Mode::TooManyRequests { .. } => {
                let mode = state.mode;
                drop(state);
                self.count(|c| c.refused += 1);
                return Admission::Refused(mode);
            }
            Mode::Blackhole => {
                drop(state);
                self.count(|c| c.blackholed += 1);
                return Admission::Blackhole;
            }
            Mode::Healthy | Mode::Slow { .. } => {}
        }
        let (reply, answer) = oneshot::channel();
        let deadline = propagated.map(|budget| now + budget);
        let waits = propagated.map_or(waits, |budget| budget.min(waits));
        state.queue.push_back(Job {
            arrived: now,
            deadline,
            waited_until: now + waits,
            reply,
        });
        self.dispatch(&mut state, now);
        Admission::Queued(answer)
    }

    /// Switches the mode (and the slots, when given). More slots serve the queue at once;
    /// fewer take effect as calls in service end.
    pub fn set(&self, control: Control) {
        let mut state = self.lock();
        state.mode = control.mode;
        if let Some(slots) = control.slots {
            state.slots = slots.max(1);
        }
        self.dispatch(&mut state, Instant::now());
    }

    /// Calls waiting in the queue.
    pub fn queued(&self) -> usize {
        self.lock().queue.len()
    }

    /// Calls in service.
    pub fn busy(&self) -> u32 {
        self.lock().busy
    }

    /// Every bucket so far, in time order.
    pub fn timeline(&self) -> Vec<Bucket> {
        self.inner
            .timeline
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(&index, &counts)| Bucket {
                unix_ms: index * 100,
                counts,
            })
            .collect()
    }

    /// The totals so far.
    pub fn totals(&self) -> Counts {
        let mut total = Counts::default();
        for bucket in self.timeline() {
            let c = bucket.counts;
            total.received += c.received;
            total.propagated += c.propagated;
            total.completed += c.completed;
            total.wasted += c.wasted;
            total.dropped_expired += c.dropped_expired;
            total.refused += c.refused;
            total.blackholed += c.blackholed;
        }
        total
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn count(&self, change: impl FnOnce(&mut Counts)) {
        let since = Instant::now().saturating_duration_since(self.inner.origin);
        let unix_ms = self.inner.origin_unix_ms + since.as_millis() as u64;
        let mut timeline = self
            .inner
            .timeline
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        change(timeline.entry(unix_ms / 100).or_default());
    }

    /// Starts what the free slots allow, first come first served; a call whose propagated
    /// deadline has passed is dropped at the head instead. A slot freed by a call that was
    /// due to end at `freed_at` starts the next call from then (or from its arrival, if
    /// later), not from when the timer fired: the timer's rounding up to whole milliseconds
    /// would otherwise make every 10 ms call take about 11 and the dependency serve 10% less
    /// than its capacity.
    fn dispatch(&self, state: &mut State, freed_at: Instant) {
        let now = Instant::now();
        while state.busy < state.slots {
            let Some(job) = state.queue.pop_front() else {
                break;
            };
            if job.deadline.is_some_and(|deadline| deadline <= now) {
                self.count(|c| c.dropped_expired += 1);
                let _ = job.reply.send(Outcome::Expired);
                continue;
            }
            state.busy += 1;
            let service = match state.mode {
                Mode::Slow { factor } => self.inner.service * factor,
                _ => self.inner.service,
            };
            let ends = freed_at.max(job.arrived) + service;
            let this = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep_until(ends).await;
                this.complete(job, ends);
            });
        }
    }

    fn complete(&self, job: Job, ended: Instant) {
        let late = ended > job.waited_until;
        self.count(|c| {
            c.completed += 1;
            if late {
                c.wasted += 1;
            }
        });
        // The caller may have gone: the work was done all the same.
        let _ = job.reply.send(Outcome::Done);
        let mut state = self.lock();
        state.busy = state.busy.saturating_sub(1);
        self.dispatch(&mut state, ended);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn capacity(slots: u32) -> Capacity {
        Capacity::with_origin(slots, 10 * MS, 0)
    }

    fn queued(admission: Admission) -> oneshot::Receiver<Outcome> {
        match admission {
            Admission::Queued(answer) => answer,
            other => panic!("expected a queued call, got {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn serves_slots_at_a_time_first_come_first_served() {
        let dependency = capacity(2);
        let start = Instant::now();
        let answers: Vec<_> = (0..5)
            .map(|_| queued(dependency.submit(None, Duration::from_secs(1))))
            .collect();
        assert_eq!((dependency.busy(), dependency.queued()), (2, 3));
        let mut ended = Vec::new();
        for answer in answers {
            assert_eq!(answer.await.unwrap(), Outcome::Done);
            ended.push(start.elapsed());
        }
        // Five calls, two at a time, 10 ms each: rounds end at 10, 20 and 30 ms, in order.
        assert_eq!(ended, [10 * MS, 10 * MS, 20 * MS, 20 * MS, 30 * MS]);
        let totals = dependency.totals();
        assert_eq!(
            (totals.received, totals.completed, totals.wasted),
            (5, 5, 0)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn drops_at_the_head_what_its_propagated_deadline_let_expire() {
        let dependency = capacity(1);
        // The first holds the only slot for 10 ms; the second's caller gave it 5 ms, the third's
        // 50 ms, the fourth propagated nothing.
        let first = queued(dependency.submit(Some(50 * MS), Duration::from_secs(1)));
        let second = queued(dependency.submit(Some(5 * MS), Duration::from_secs(1)));
        let third = queued(dependency.submit(Some(50 * MS), Duration::from_secs(1)));
        let fourth = queued(dependency.submit(None, 5 * MS));
        assert_eq!(first.await.unwrap(), Outcome::Done);
        assert_eq!(second.await.unwrap(), Outcome::Expired);
        assert_eq!(third.await.unwrap(), Outcome::Done);
        // No deadline propagated: served, though its caller (5 ms) has long stopped waiting.
        assert_eq!(fourth.await.unwrap(), Outcome::Done);
        let totals = dependency.totals();
        assert_eq!(totals.dropped_expired, 1);
        assert_eq!((totals.received, totals.propagated), (4, 3));
        assert_eq!(totals.completed, 3);
        assert_eq!(
            totals.wasted, 1,
            "only the fourth completed after its caller gave up"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn never_abandons_work_whose_caller_left() {
        let dependency = capacity(1);
        let first = queued(dependency.submit(None, Duration::from_secs(1)));
        drop(queued(dependency.submit(None, 15 * MS))); // the caller disconnects
        let third = queued(dependency.submit(None, Duration::from_secs(1)));
        let start = Instant::now();
        first.await.unwrap();
        third.await.unwrap();
        // The abandoned call still took its 10 ms turn between the other two.
        assert_eq!(start.elapsed(), 30 * MS);
        let totals = dependency.totals();
        assert_eq!((totals.completed, totals.wasted), (3, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn modes_refuse_blackhole_slow_and_capacity_drop() {
        let dependency = capacity(2);
        dependency.set(Control {
            mode: Mode::Down,
            slots: None,
        });
        assert!(matches!(
            dependency.submit(None, Duration::from_secs(1)),
            Admission::Refused(Mode::Down)
        ));
        dependency.set(Control {
            mode: Mode::Blackhole,
            slots: None,
        });
        assert!(matches!(
            dependency.submit(None, Duration::from_secs(1)),
            Admission::Blackhole
        ));
        dependency.set(Control {
            mode: Mode::Slow { factor: 3 },
            slots: Some(1),
        });
        let start = Instant::now();
        let a = queued(dependency.submit(None, Duration::from_secs(1)));
        let b = queued(dependency.submit(None, Duration::from_secs(1)));
        a.await.unwrap();
        b.await.unwrap();
        // One slot, 30 ms each.
        assert_eq!(start.elapsed(), 60 * MS);
        let totals = dependency.totals();
        assert_eq!(
            (totals.received, totals.refused, totals.blackholed),
            (4, 1, 1)
        );
    }

    /// On the real clock (its rounding is the point): tokio's timer fires a 10 ms sleep at the
    /// next whole millisecond after it, so calls timed one after another from each wake-up
    /// would take about 10.5 ms each and the dependency serve less than its capacity.
    #[tokio::test(flavor = "current_thread")]
    async fn calls_queued_behind_each_other_keep_the_service_time_on_the_real_clock() {
        let dependency = capacity(1);
        let start = Instant::now();
        let answers: Vec<_> = (0..50)
            .map(|_| queued(dependency.submit(None, Duration::from_secs(10))))
            .collect();
        for answer in answers {
            answer.await.unwrap();
        }
        let took = start.elapsed();
        assert!(took >= 500 * MS, "{took:?}");
        assert!(took < 512 * MS, "50 calls of 10 ms took {took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn buckets_follow_the_clock_in_100_ms_steps() {
        let dependency = Capacity::with_origin(1, 10 * MS, 1_000);
        drop(dependency.submit(None, Duration::from_secs(1)));
        tokio::time::advance(Duration::from_millis(250)).await;
        drop(dependency.submit(None, Duration::from_secs(1)));
        tokio::time::sleep(20 * MS).await;
        let received: Vec<(u64, u64)> = dependency
            .timeline()
            .iter()
            .map(|b| (b.unix_ms, b.counts.received))
            .collect();
        assert_eq!(received, [(1_000, 1), (1_200, 1)]);
    }
}
