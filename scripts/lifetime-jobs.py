#!/usr/bin/env python3
"""What consolidation cost a lifetime run's Jobs: per controller, how late each Job finished (its last
task's successful end, from the Job's creation, minus the task runtime: 0 if every task started at
once and ran once), how many task runs there were against the tasks asked for, how many tasks were
evicted while running (a DisruptionTarget condition), how many were cut short, and the task CPU-minutes
those threw away (run again from the start, as the Jobs' podFailurePolicy asks). The bill counts the
rerun as node time; this shows what it does to the Jobs.

A task is cut short when it stops before its runtime, and it stops when its pod ends or its node's
NodeClaim goes, whichever is first. The e2e kubelet stand-in does not kill an evicted task at the
end of its grace period, and keeps running the pods of a Node whose instance is gone until Pod GC
deletes them or their runtime ends; a task it then reports Succeeded is counted cut short here (a
real instance's termination ends it), and if nothing ran it again its Job counts as unfinished.

    scripts/lifetime-jobs.py benches/results/lifetime/batch [more dirs...]

Reads results.json (history, compression) and each contender's recording.json (wall seconds; times
compression is history seconds). A Job not finished at the end counts as finishing at the end.
"""
import argparse

from lifetime_recordings import jobs as job_index, quantile, recording, results


def node_gone(rec):
    """When each Node's NodeClaim went (wall s), by Node name: stowage's Nodes are named as their
    NodeClaims, KWOK's `kwok-<claim>-<suffix>`."""
    by_claim = {c["name"]: c.get("gone_s") for c in rec["claims"].values() if c.get("gone_s") is not None}
    out = {}
    for p in rec["pods"].values():
        n = p.get("node")
        if not n or n in out:
            continue
        claim = n if n in by_claim else next((c for c in by_claim if n.startswith(f"kwok-{c}-")), None)
        if claim is not None:
            out[n] = by_claim[claim]
    return out


def jobs_of(dir_):
    res = results(dir_)
    k = res["timing"]["compression"]
    jobs = job_index(res)
    out = []
    for s in res["summaries"]:
        who = s["contender"]
        rec = recording(dir_, who)
        end_h = rec["end_s"] * k
        gone = node_gone(rec)
        done = {name: [] for name in jobs}
        runs = cut = evicted = 0
        thrown = 0.0
        for p in rec["pods"].values():
            j = jobs.get(p.get("app"))
            if j is None:
                continue
            if p.get("running_s") is None:
                continue
            runs += 1
            evicted += bool(p.get("evicted"))
            end = p.get("ended_s")
            # A task stops when its pod ends or its node goes, whichever is first (module doc).
            stop = min(t for t in (end, gone.get(p.get("node")), rec["end_s"]) if t is not None)
            ran = (stop - p["running_s"]) * k
            if end is not None and ran >= j["runtime_s"] * 0.99:
                # Its whole runtime (the lifetime report's own test): done, evicted or not.
                done[j["name"]].append(end * k)
            elif stop < rec["end_s"]:
                cut += 1
                thrown += ran / 60 * j["cpu_m"] / 1000
        late = []
        unfinished = 0
        for name, j in jobs.items():
            ends = done[name]
            if len(ends) < j["count"]:
                unfinished += 1
                finish = end_h
            else:
                finish = max(ends)
            late.append(max(0.0, finish - j["at_s"] - j["runtime_s"]) / 60)
        tasks = sum(j["count"] for j in jobs.values())
        out.append((who, late, runs, tasks, evicted, cut, thrown, unfinished, k))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+")
    a = ap.parse_args()
    print("| run | compression | controller | Jobs | late p50 / p90 / max (history min) | mean late | task runs / tasks | evicted while running | tasks cut short | task CPU-min thrown away | unfinished Jobs |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for d in a.dirs:
        for who, late, runs, tasks, evicted, cut, thrown, unfinished, k in jobs_of(d):
            mean = sum(late) / len(late) if late else float("nan")
            print(f"| {d} | {k:g}x | {who} | {len(late)} | {quantile(late, 0.5):.1f} / {quantile(late, 0.9):.1f} / {max(late, default=0):.1f} | {mean:.1f} | {runs} / {tasks} | {evicted} | {cut} | {thrown:.0f} | {unfinished} |")


if __name__ == "__main__":
    main()
