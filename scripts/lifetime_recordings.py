"""What the lifetime scripts (scripts/lifetime-*.py) share: reading a written comparison."""
import json
import os


def quantile(xs, q):
    """The q-quantile of xs by nearest rank; NaN if there are none."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round((len(xs) - 1) * q)))] if xs else float("nan")


def results(dir_):
    """The comparison's results.json."""
    with open(os.path.join(dir_, "results.json")) as f:
        return json.load(f)


def jobs(res):
    """The history's Jobs by name (their events: at_s, count, cpu_m, runtime_s)."""
    return {e["name"]: e for e in res["history"]["events"] if e["action"] == "job"}


def recording(dir_, contender):
    """A contender's recording.json (wall seconds; times compression is history seconds)."""
    with open(os.path.join(dir_, contender, "recording.json")) as f:
        return json.load(f)
