#!/usr/bin/env python3
"""Where a lifetime run's distance to the bound lies, per bin of history time: each controller's
bill and the bound's (dollars), the CPU-minutes of Job tasks each controller ran and those the bound
counts (a Job's tasks from its creation for their runtime, as if they started at once), and how long
tasks waited from creation to Running.

    scripts/lifetime-bins.py benches/results/lifetime/batch [--bin-min 10]

Reads results.json (history, compression, each controller's $/h curve, the bound's curve) and each
contender's recording.json (wall seconds; times compression is history seconds).
"""
import argparse

from lifetime_recordings import jobs as job_index, quantile, recording, results


def add(bins, width, start, end, rate):
    """Adds `rate` per second over [start, end) into bins of `width` seconds."""
    x = start
    while x < end - 1e-9 and x < width * len(bins):
        k = int(x // width)
        y = min(end, (k + 1) * width)
        bins[k] += rate * (y - x)
        x = y


def step_cost(points, until_s, width, n):
    """Dollars per bin of a $/h step curve [(hours, $/h or None)] held to the next point."""
    bins = [0.0] * n
    for i, (t, v) in enumerate(points):
        end = points[i + 1][0] * 3600 if i + 1 < len(points) else until_s
        add(bins, width, t * 3600, end, (v or 0.0) / 3600)
    return bins


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--bin-min", type=float, default=10.0)
    a = ap.parse_args()
    res = results(a.dir)
    k = res["timing"]["compression"]
    dur = res["history"]["duration_s"]
    width = a.bin_min * 60
    n = int(-(-dur // width))
    jobs = job_index(res)
    rows = [("bound $", step_cost(res["bound_curve"], dur, width, n))]
    ideal = [0.0] * n
    for j in jobs.values():
        add(ideal, width, j["at_s"], min(dur, j["at_s"] + j["runtime_s"]), j["count"] * j["cpu_m"] / 1000 / 60)
    waits = {}
    for s in res["summaries"]:
        who = s["contender"]
        # The summary's curve: $/h at each history minute, held to the next.
        rows.append((f"{who} $", step_cost(s["curve"], dur, width, n)))
        rec = recording(a.dir, who)
        ran = [0.0] * n
        w = []
        for p in rec["pods"].values():
            j = jobs.get(p.get("app"))
            if j is None or p.get("running_s") is None:
                continue
            end = p.get("ended_s") or rec["end_s"]
            add(ran, width, p["running_s"] * k, end * k, j["cpu_m"] / 1000 / 60)
            w.append((p["running_s"] - p["created_s"]) * k)
        rows.append((f"{who} task cpu-min", ran))
        waits[who] = w
    rows.insert(1, ("bound task cpu-min", ideal))
    print("bin start (min) " + " ".join(f"{i * a.bin_min:>7.0f}" for i in range(n)) + "     total")
    for name, b in rows:
        print(f"{name:<22}"[:22].ljust(16) + " ".join(f"{x:>7.2f}" if "$" in name else f"{x:>7.0f}" for x in b) + f" {sum(b):>9.2f}")
    for who, w in waits.items():
        print(f"{who}: tasks started p50 {quantile(w, 0.5):.0f} s, p90 {quantile(w, 0.9):.0f} s, p99 {quantile(w, 0.99):.0f} s of history after creation ({len(w)} tasks)")


if __name__ == "__main__":
    main()
