#!/usr/bin/env python3
"""Instructions, clock reads and timer insertions per admitted call, counted by callgrind.

Wall-clock numbers on a shared two-core machine move with whatever else runs; instruction
counts do not. This runs the `allocations` bench binary's `--profile NAME OP N` mode under
`valgrind --tool=callgrind`, counting only inside `profiled_loop`, and subtracts the bare
operation measured the same way. Valgrind turns the vDSO clock read into a system call, so a
clock read's own cost is not in the instruction count: it is counted apart (calls to
`clock_gettime`), and each costs what `primitive/clock_read` says on the machine at hand.

    cargo bench --no-run && python3 benches/callgrind.py [N] [NAME ...]

With `--layers`, the `layers` bench binary instead (`cargo bench --features http --bench layers
--no-run`): our deadline + bulkhead + breaker layers (`ours`) against tower's Timeout + LoadShed +
ConcurrencyLimit (`tower`), the bare `service_fn` subtracted.

With `--guard`, issue 41's per-call guard from one run: each row of the tower comparison
(`#[resilient]` and `#[critical]` ready and waiting once against tower's ConcurrencyLimit +
Timeout, the layer stack against tower's Timeout + LoadShed + ConcurrencyLimit), its ratio, its
goal and the verdict, computed; and the floor under the expansions (`standard_parts_floor`).
It builds the two binaries itself (the `allocations` bench with the default features, the
`layers` bench with `http`) and profiles what cargo says it built, so a binary left by another
build (`--all-features` compiles the `metrics` feature in) is never the one counted.

With `--metrics`, the `metrics` bench binary in both of its builds (`cargo bench --bench metrics
--no-run` and the same with `--features metrics`): the `#[resilient]` and `#[critical]`
expansions with the `metrics` feature off and on (no recorder installed), and the difference.
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

CONTENDERS = [
    "resilient_expansion",
    "critical_expansion",
    "ours_breaker_bulkhead_deadline",
    "ours_breaker_try_bulkhead_deadline",
    "tower_cl_timeout",
    "tower_retry_cl_timeout",
    "semaphore_timeout",
    "failsafe_semaphore_timeout",
    "standard_parts_floor",
    "what_if_fresh_budget",
    "what_if_try_acquire",
    "what_if_one_run",
    "what_if_all_three",
]
COUNTED = {"clock_gettime": "clock reads", "Wheel::insert": "timers armed"}


LAYER_CONTENDERS = ["ours", "tower"]


def binary(bench="allocations"):
    candidates = [
        p for p in glob.glob(f"target/release/deps/{bench}-*")
        if os.access(p, os.X_OK) and not p.endswith(".d")
    ]
    if not candidates:
        sys.exit(f"no {bench} bench binary: run `cargo bench --no-run` first")
    return max(candidates, key=os.path.getmtime)


def profile(bin_path, name, op, n):
    with tempfile.NamedTemporaryFile(suffix=".callgrind", delete=False) as f:
        out = f.name
    subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
         "--toggle-collect=*profiled_loop*", bin_path, "--profile", name, op, str(n)],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    names, calls, total = {}, {k: 0 for k in COUNTED}, 0
    current = None
    with open(out) as f:
        for line in f:
            m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line)
            if m:
                if m.group(2):
                    names[m.group(1)] = m.group(2)
                if line.startswith("cfn="):
                    current = names.get(m.group(1), "")
                continue
            if line.startswith("calls=") and current is not None:
                count = int(line.split()[0][len("calls="):])
                for key in COUNTED:
                    if key in current:
                        calls[key] += count
                current = None
            elif line.startswith("totals:") or line.startswith("summary:"):
                total = int(line.split()[1])
    os.unlink(out)
    return total, calls


METRICS_CONTENDERS = ["resilient_expansion", "critical_expansion"]


def metrics_builds():
    """Both builds of the `metrics` bench binary, by the name each prints for `--build`."""
    builds = {}
    paths = [
        p for p in glob.glob("target/release/deps/metrics-*")
        if os.access(p, os.X_OK) and not p.endswith(".d")
    ]
    for path in sorted(paths, key=os.path.getmtime):
        out = subprocess.run([path, "--build"], capture_output=True, text=True)
        name = out.stdout.strip()
        if name in ("metrics_on", "metrics_off"):
            builds[name] = path
    missing = {"metrics_on", "metrics_off"} - builds.keys()
    if missing:
        sys.exit(f"no {', '.join(sorted(missing))} build: run `cargo bench --bench metrics "
                 "--no-run` with and without `--features metrics`")
    return builds


def profile_metrics(bin_path, name, op, n):
    with tempfile.NamedTemporaryFile(suffix=".callgrind", delete=False) as f:
        out = f.name
    subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
         "--toggle-collect=*profiled_loop*", bin_path, "--profile", name, op, str(n)],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    total = 0
    with open(out) as f:
        for line in f:
            if line.startswith("totals:") or line.startswith("summary:"):
                total = int(line.split()[1])
    os.unlink(out)
    return total


def main_metrics(n):
    builds = metrics_builds()
    print(f"callgrind, {n} calls each, bare operation subtracted\n")
    print("| operation | contender | instructions/call, metrics off | on (no recorder) | on − off |")
    print("|---|---|---:|---:|---:|")
    for op in ["ready", "waits_once"]:
        per = {}
        for build, path in builds.items():
            bare = profile_metrics(path, "bare", op, n)
            for name in METRICS_CONTENDERS:
                per[(build, name)] = (profile_metrics(path, name, op, n) - bare) / n
        for name in METRICS_CONTENDERS:
            off, on = per[("metrics_off", name)], per[("metrics_on", name)]
            print(f"| {op} | {name} | {off:.0f} | {on:.0f} | {on - off:+.0f} |")


def built(bench, features=None):
    """The executable cargo builds for `bench` (with `features`), by its own report."""
    cmd = ["cargo", "bench", "--no-run", "--bench", bench, "--message-format=json"]
    if features:
        cmd += ["--features", features]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    path = None
    for line in out.splitlines():
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        if msg.get("reason") == "compiler-artifact" and msg.get("executable") \
                and msg.get("target", {}).get("name") == bench:
            path = msg["executable"]
    if path is None:
        sys.exit(f"cargo built no `{bench}` bench executable")
    return path


# (row, binary, ours, theirs, operation, goal: ours / theirs at most)
GUARD = [
    ("`#[resilient]` ready", "allocations", "resilient_expansion", "tower_cl_timeout", "ready", 0.75),
    ("`#[critical]` ready", "allocations", "critical_expansion", "tower_cl_timeout", "ready", 1.00),
    ("`#[resilient]` waits once", "allocations", "resilient_expansion", "tower_cl_timeout", "waits_once", 1.00),
    ("`#[critical]` waits once", "allocations", "critical_expansion", "tower_cl_timeout", "waits_once", 1.00),
    ("layer stack ready", "layers", "ours", "tower", "ready", 1.00),
    ("layer stack waits once", "layers", "ours", "tower", "waits_once", 1.00),
]


def main_guard(n):
    bins = {"allocations": built("allocations"), "layers": built("layers", "http")}
    cache = {}

    def per_call(binary_name, name, op):
        key = (binary_name, name, op)
        if key not in cache:
            path = bins[binary_name]
            bare = cache.setdefault((binary_name, "bare", op), profile(path, "bare", op, n)[0])
            cache[key] = (profile(path, name, op, n)[0] - bare) / n
        return cache[key]

    print(f"callgrind, {n} calls each, bare operation subtracted; instructions per admitted call "
          f"({bins['allocations']}, {bins['layers']})\n")
    print("| row | ours | tower | / tower | goal | verdict |")
    print("|---|---:|---:|---:|---:|---|")
    missed = 0
    for row, binary_name, ours, theirs, op, goal in GUARD:
        a, b = per_call(binary_name, ours, op), per_call(binary_name, theirs, op)
        ratio = a / b
        met = ratio <= goal
        missed += not met
        verdict = "met" if met else f"missed by {a - goal * b:,.0f} instructions"
        print(f"| {row} | {a:,.0f} | {b:,.0f} | {ratio:.2f} | <= {goal:.2f} | {verdict} |")
    floor = per_call("allocations", "standard_parts_floor", "ready")
    tower = per_call("allocations", "tower_cl_timeout", "ready")
    print(f"\nThe floor: the standard parts under `#[resilient]`, alone (`standard_parts_floor`), "
          f"ready: {floor:,.0f} instructions, {floor / tower:.2f} of tower's {tower:,.0f}.")
    print(f"{len(GUARD) - missed} of {len(GUARD)} rows met.")


def main():
    args = sys.argv[1:]
    if "--guard" in args:
        args = [a for a in args if a != "--guard"]
        main_guard(int(args[0]) if args else 20000)
        return
    if "--metrics" in args:
        args = [a for a in args if a != "--metrics"]
        main_metrics(int(args[0]) if args else 20000)
        return
    layers = "--layers" in args
    args = [a for a in args if a != "--layers"]
    n = int(args[0]) if args else 20000
    wanted = args[1:] or (LAYER_CONTENDERS if layers else CONTENDERS)
    bin_path = binary("layers" if layers else "allocations")
    print(f"callgrind, {n} calls each, bare operation subtracted ({bin_path})\n")
    print("| operation | contender | instructions/call | clock reads/call | timers armed/call |")
    print("|---|---|---:|---:|---:|")
    for op in ["ready", "waits_once"]:
        bare_total, bare_calls = profile(bin_path, "bare", op, n)
        for name in wanted:
            total, calls = profile(bin_path, name, op, n)
            per = lambda key: (calls[key] - bare_calls[key]) / n
            print(f"| {op} | {name} | {(total - bare_total) / n:.0f} | "
                  f"{per('clock_gettime'):.2f} | {per('Wheel::insert'):.2f} |")


if __name__ == "__main__":
    main()
