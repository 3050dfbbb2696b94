#!/usr/bin/env python3
"""Pod moves per saved dollar, per controller (issue 17's second target): what consolidation saved
each controller on a history (its bill with `--consolidation-policy when-empty` minus its bill with
the default `WhenEmptyOrUnderutilized`) against the evictions it made for it.

    scripts/lifetime-moves.py benches/results/lifetime/batch benches/results/lifetime-when-empty/batch
"""
import json
import os
import sys


def load(d):
    r = json.load(open(os.path.join(d, "results.json")))
    return r, {s["contender"]: s for s in r["summaries"]}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    on, on_rows = load(sys.argv[1])
    off, off_rows = load(sys.argv[2])
    for r, want in [(on, "WhenEmptyOrUnderutilized"), (off, "WhenEmpty")]:
        got = r.get("consolidation_policy")
        if got is not None and got != want:
            sys.exit(f"{want} run expected, {got} found")
    if on["history"]["name"] != off["history"]["name"]:
        sys.exit("the two runs are of different histories")
    print(f"| controller | cost, consolidating ($) | cost, WhenEmpty ($) | saved ($) | evictions | evictions, WhenEmpty | moves per saved $ |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, s in on_rows.items():
        b = off_rows.get(name)
        if b is None:
            continue
        saved = b["cost_usd"] - s["cost_usd"]
        moves = s["evictions"] - b["evictions"]
        per = f"{moves / saved:.1f}" if saved > 0 else "- (nothing saved)"
        print(f"| {name} | {s['cost_usd']:.2f} | {b['cost_usd']:.2f} | {saved:.2f} | {s['evictions']} | {b['evictions']} | {per} |")


if __name__ == "__main__":
    main()
