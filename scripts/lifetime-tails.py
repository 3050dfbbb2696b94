#!/usr/bin/env python3
"""Where a lifetime run's bill goes, per controller: each NodeClaim's billed time split into
boot (launch to its first pod Running), busy (the union of its pods' Running intervals), gaps (empty
between pods) and tail (its last pod's end to its deletion), in dollars of history time.

    scripts/lifetime-tails.py benches/results/lifetime/openb [--after-min M]

Reads results.json (compression) and each contender's recording.json. A pod belongs to the NodeClaim
whose name its node carries (stowage's Nodes are named after their NodeClaims; Karpenter's KWOK Nodes
are `kwok-<nodeclaim>-...`). `--after-min M` counts only billed time after minute M of history.
"""
import argparse
import json
import os
import statistics


def claim_of(node, claims):
    if node in claims:
        return node
    for c in claims:
        if node.startswith(f"kwok-{c}-"):
            return c
    return None


def union(intervals):
    out = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def clip(a, b, lo):
    return max(0.0, b - max(a, lo))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--after-min", type=float, default=0.0)
    args = ap.parse_args()
    res = json.load(open(os.path.join(args.dir, "results.json")))
    k = res["timing"]["compression"]
    lo = args.after_min * 60.0 / k  # wall seconds
    usd = lambda wall_s, price: wall_s * k / 3600.0 * price
    print(f"{'controller':<10} {'claims':>6} {'total':>8} {'boot':>7} {'busy':>8} {'gaps':>7} {'tail':>7} {'tail p50 s':>10} {'tail max s':>10}")
    for run in res["runs"]:
        name = run["contender"]
        rec = json.load(open(os.path.join(args.dir, name, "recording.json")))
        end = rec["end_s"]
        claims = rec["claims"]
        pods = {}
        for p in rec["pods"].values():
            if p.get("node") and p.get("running_s") is not None:
                c = claim_of(p["node"], claims)
                if c:
                    pods.setdefault(c, []).append(p)
        tot = boot = busy = gaps = tail = 0.0
        tails = []
        for c, cl in claims.items():
            a = cl["launched_s"]
            b = cl.get("gone_s") or end
            price = cl["price"]
            tot += usd(clip(a, b, lo), price)
            ivs = union([(p["running_s"], min(p.get("ended_s") or b, b)) for p in pods.get(c, [])])
            if not ivs:
                boot += usd(clip(a, b, lo), price)
                continue
            boot += usd(clip(a, ivs[0][0], lo), price)
            for (x, y) in ivs:
                busy += usd(clip(x, y, lo), price)
            for (_, y), (x, _) in zip(ivs, ivs[1:]):
                gaps += usd(clip(y, x, lo), price)
            tail += usd(clip(ivs[-1][1], b, lo), price)
            if cl.get("gone_s"):
                tails.append(b - ivs[-1][1])
        p50 = statistics.median(tails) if tails else 0.0
        mx = max(tails) if tails else 0.0
        print(f"{name:<10} {len(claims):>6} {tot:>8.2f} {boot:>7.2f} {busy:>8.2f} {gaps:>7.2f} {tail:>7.2f} {p50:>10.1f} {mx:>10.1f}")


if __name__ == "__main__":
    main()
