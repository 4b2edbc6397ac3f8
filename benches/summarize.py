#!/usr/bin/env python3
"""Prints BENCHMARKS.md's tables and goal ratios from criterion's last run.

Reads target/criterion/<group>/<bench>/new/estimates.json (the median time per call over the
samples: on a machine shared with other work it moves less than criterion's slope or mean when
a few samples are disturbed) and target/contention.json. Run after
`cargo bench`, for every section or the ones named:

    python3 benches/summarize.py [primitives|mechanisms|stacks|what_if|contention|redis|goals ...]
"""
import json
import os
import sys

ROOT = os.environ.get("CRITERION_DIR", "target/criterion")
# benches/contention.rs writes its rates beside criterion's folder: target/contention.json.


def estimate(group, bench):
    path = os.path.join(ROOT, group, bench, "new", "estimates.json")
    try:
        with open(path) as f:
            d = json.load(f)
    except FileNotFoundError:
        return None
    e = d["median"]
    return e["point_estimate"], e["confidence_interval"]["lower_bound"], e["confidence_interval"]["upper_bound"]


def ns(group, bench):
    e = estimate(group, bench)
    return e[0] if e else None


def fmt_ns(v):
    return "—" if v is None else (f"{v:.2f}" if v < 10 else f"{v:.1f}")


def row(*cells):
    print("| " + " | ".join(str(c) for c in cells) + " |")


def primitives():
    print("### Primitives (ns per operation)\n")
    row("operation", "ns")
    row("---", "---:")
    for b, what in [
        ("atomic_load", "one `AtomicU64::load(Acquire)`"),
        ("clock_read", "one `tokio::time::Instant::now()`"),
        ("ours_check", "`Breaker::check()` on a closed breaker"),
        ("failsafe_is_call_permitted", "failsafe `is_call_permitted()` (closed)"),
    ]:
        row(what, fmt_ns(ns("primitive", b)))
    print()


MECHANISM_PAIRS = [
    ("breaker check + record", "ours_breaker", "failsafe_breaker", "failsafe `call`"),
    ("bulkhead permit", "ours_bulkhead", "semaphore", "`Semaphore::acquire`"),
    ("deadline child + `run`", "ours_deadline", "tokio_timeout", "`tokio::time::timeout`"),
    ("shedding decision", "ours_shedding", None, "(none)"),
    ("retry, first attempt succeeds", "ours_retry", "tower_retry", "tower `Retry`, never retries"),
]


def mechanisms():
    bare = ns("mechanism", "bare")
    print(f"### Each mechanism alone, ready operation (bare call: {fmt_ns(bare)} ns)\n")
    row("mechanism", "ours ns/call", "ours over bare", "alternative", "alt ns/call", "alt over bare", "ours / alt (over bare)")
    row("---", "---:", "---:", "---", "---:", "---:", "---:")
    for what, ours, alt, alt_name in MECHANISM_PAIRS:
        o = ns("mechanism", ours)
        a = ns("mechanism", alt) if alt else None
        ratio = "—" if (o is None or a is None) else f"{(o - bare) / (a - bare):.2f}"
        row(what, fmt_ns(o), fmt_ns(o - bare if o else None), alt_name, fmt_ns(a),
            fmt_ns(a - bare if a else None), ratio)
    print()


STACK = [
    ("resilient_expansion", "`#[resilient]` function (the macro's expansion): the operation's deadline, retry, breaker, bulkhead, run"),
    ("critical_expansion", "`#[critical]` function (the macro's expansion): the operation's deadline, `run(scope(..))`"),
    ("resilient_by_hand", "the same sequence by hand, as the README documents it (with `require` and shedding)"),
    ("critical_by_hand", "`#[critical]` by hand: child of current deadline, `require`, `run(scope(..))`"),
    ("ours_breaker_bulkhead_deadline", "ours: breaker + bulkhead + deadline (no retry, no shedding)"),
    ("ours_breaker_try_bulkhead_deadline", "ours: the same, bulkhead by `try_acquire` (synchronous fast path)"),
    ("tower_cl_timeout", "tower `ConcurrencyLimit` + `Timeout`"),
    ("tower_retry_cl_timeout", "tower `Retry` + `ConcurrencyLimit` + `Timeout`"),
    ("semaphore_timeout", "`Semaphore::acquire` + `tokio::time::timeout`"),
    ("failsafe_semaphore_timeout", "failsafe breaker + semaphore + `timeout`"),
]


def stacks():
    for op in ["ready", "waits_once"]:
        g = f"stack_{op}"
        bare = ns(g, "bare")
        tower = ns(g, "tower_cl_timeout")
        title = "ready at once" if op == "ready" else "waits once (one `Pending`)"
        print(f"### Full stacks, operation {title} (bare call: {fmt_ns(bare)} ns)\n")
        row("contender", "ns/call", "over bare", "/ tower CL+Timeout (total)", "/ tower CL+Timeout (over bare)")
        row("---", "---:", "---:", "---:", "---:")
        for b, what in STACK:
            v = ns(g, b)
            if v is None:
                continue
            row(what, fmt_ns(v), fmt_ns(v - bare), f"{v / tower:.2f}", f"{(v - bare) / (tower - bare):.2f}")
        print()


CONTENTION = [
    ("bare", "bare call (no shared state)"),
    ("ours_breaker", "ours: breaker check + record"),
    ("failsafe_breaker", "failsafe `call`"),
    ("ours_bulkhead", "ours: bulkhead permit"),
    ("semaphore", "`Semaphore::acquire`"),
    ("ours_deadline", "ours: deadline child + `run` (nothing shared)"),
    ("tokio_timeout", "`tokio::time::timeout` (nothing shared)"),
    ("ours_breaker_bulkhead_deadline", "ours: breaker + bulkhead + deadline"),
    ("ours_breaker_try_bulkhead_deadline", "ours: the same, bulkhead by `try_acquire`"),
    ("resilient_expansion", "`#[resilient]` function (the macro)"),
    ("tower_cl_timeout", "tower `ConcurrencyLimit` + `Timeout`"),
    ("tower_retry_cl_timeout", "tower `Retry` + `ConcurrencyLimit` + `Timeout`"),
    ("semaphore_timeout", "semaphore + `timeout`"),
    ("failsafe_semaphore_timeout", "failsafe + semaphore + `timeout`"),
]


def contention_rates():
    path = os.path.join(os.path.dirname(ROOT.rstrip("/")) or ".", "contention.json")
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def contention():
    rates = contention_rates()
    if not rates:
        return
    tower = rates["tower_cl_timeout"]
    print("### Two threads through one shared instance (million calls per second, best and median of 9 interleaved rounds)\n")
    row("contender", "2 threads, best", "2 threads, median", "1 thread, best", "scaling (best)", "best / tower's best", "median / tower's median")
    row("---", "---:", "---:", "---:", "---:", "---:", "---:")
    for b, what in CONTENTION:
        r = rates.get(b)
        if r is None:
            continue
        row(what, f"{r['best'] / 1e6:.1f}", f"{r['median'] / 1e6:.1f}", f"{r['single'] / 1e6:.1f}",
            f"{r['best'] / r['single']:.2f}",
            f"{r['best'] / tower['best']:.2f}", f"{r['median'] / tower['median']:.2f}")
    print()


WHAT_IF = [
    ("fresh_budget", "`require` and shedding read the fresh child's budget (2 clock reads fewer)"),
    ("try_acquire", "bulkhead slot by the synchronous `try_acquire`"),
    ("one_run", "one `Run` per attempt (retry's own), not two"),
    ("all_three", "all three"),
]


def what_if():
    print("### What-if: the `#[resilient]` expansion with one profiled cost removed (ns per call)\n")
    row("variant", "ready", "vs the expansion", "waits once", "vs the expansion")
    row("---", "---:", "---:", "---:", "---:")
    base_r, base_w = ns("stack_ready", "resilient_by_hand"), ns("stack_waits_once", "resilient_by_hand")
    row("the sequence by hand, as the README documents it", fmt_ns(base_r), "1.00", fmt_ns(base_w), "1.00")
    for b, what in WHAT_IF:
        r, w = ns("what_if_ready", b), ns("what_if_waits_once", b)
        if r is None or w is None:
            continue
        row(what, fmt_ns(r), f"{r / base_r:.2f}", fmt_ns(w), f"{w / base_w:.2f}")
    print()


def redis():
    g = "redis_hot_path"
    if ns(g, "breaker_redis_store") is None:
        return
    print("### Hot path with the Redis store (ns per call, ready operation)\n")
    row("sequence", "in-process breaker", "Redis-backed breaker", "ratio")
    row("---", "---:", "---:", "---:")
    for b, what in [("breaker", "breaker check + record"), ("resilient_expansion", "`#[resilient]` expansion")]:
        local, shared = ns(g, f"{b}_in_process"), ns(g, f"{b}_redis_store")
        row(what, fmt_ns(local), fmt_ns(shared), f"{shared / local:.2f}")
    print()


def interleaved():
    """`benches/contention.rs`'s one-thread goal timing: each contender's fastest of
    interleaved rounds (target/interleaved.json), robust to a neighbour's build."""
    path = os.path.join(os.path.dirname(ROOT.rstrip("/")) or ".", "interleaved.json")
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def goals():
    timing = interleaved() or {}
    at = lambda op, b: timing.get(op, {}).get(b)
    rates = contention_rates() or {}
    best = lambda b: rates[b]["best"] if b in rates else None
    cr, cx, ct = best("ours_breaker_bulkhead_deadline"), best("resilient_expansion"), best("tower_cl_timeout")
    load = ns("primitive", "atomic_load")
    check = ns("primitive", "ours_check")
    print("### Goals\n")
    print("Per-call ratios from the interleaved one-thread timing (`benches/contention.rs`, "
          "`target/interleaved.json`); throughput from the two-thread rounds.\n")
    row("goal (issue 41: the per-call guard)", "target", "measured", "verdict")
    row("---", "---", "---:", "---")

    def ratio(what, num, den, target, at_most=True):
        if num is None or den is None:
            return
        r = num / den
        met = r <= target if at_most else r >= target
        sign = "≤" if at_most else "≥"
        verdict = "met" if met else (f"missed (by {r / target:.2f}x)" if at_most else f"missed (by {target / r:.2f}x)")
        row(what, f"{sign} {target:.2f}", f"{r:.2f}", verdict)

    ratio("`#[resilient]` / tower CL+Timeout, ready", at("ready", "resilient_expansion"), at("ready", "tower_cl_timeout"), 0.75)
    ratio("`#[critical]` / tower CL+Timeout, ready", at("ready", "critical_expansion"), at("ready", "tower_cl_timeout"), 1.00)
    ratio("`#[resilient]` / tower CL+Timeout, waits once", at("waits_once", "resilient_expansion"), at("waits_once", "tower_cl_timeout"), 1.00)
    ratio("`#[critical]` / tower CL+Timeout, waits once", at("waits_once", "critical_expansion"), at("waits_once", "tower_cl_timeout"), 1.00)
    ratio("2 threads, `#[resilient]` / tower CL+Timeout, throughput (best rounds)", cx, ct, 1.00, at_most=False)
    ratio("2 threads, breaker+bulkhead+deadline / tower, throughput (best rounds)", cr, ct, 1.00, at_most=False)
    layers = [(op, ns(f"layers_{op}", "ours_deadline_bulkhead_breaker"), ns(f"layers_{op}", "tower_timeout_loadshed_concurrencylimit")) for op in ["ready", "waits_once"]]
    for op, ours, tower in layers:
        ratio(f"layers: deadline+bulkhead+breaker / tower Timeout+LoadShed+ConcurrencyLimit, {op.replace('_', ' ')}", ours, tower, 1.00)
    if load and check:
        row("closed breaker check vs one atomic load", "≈ 1", f"{check / load:.2f}", "met" if check / load <= 1.5 else "missed")
    print()


SECTIONS = {
    "primitives": primitives,
    "mechanisms": mechanisms,
    "stacks": stacks,
    "what_if": what_if,
    "contention": contention,
    "redis": redis,
    "goals": goals,
}

if __name__ == "__main__":
    for name in sys.argv[1:] or SECTIONS:
        SECTIONS[name]()
