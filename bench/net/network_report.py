#!/usr/bin/env python3
"""The tables and plots of bench/network.sh, from the summaries of its runs.

    network_report.py OUT STEPS SWEEP_STEPS COUNTS SLOWDOWN "128 256 ..." DOCS_DIR REPEATS

Each configuration NAME ran REPEATS times (NAME.1.json ...): its figures here are the medians over
the runs that finished; a failed run is counted and printed, never left out silently.
"""
import json
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

out, steps, sweep_steps, counts, slow, sweep, docs = sys.argv[1:8]
repeats = int(sys.argv[8]) if len(sys.argv) > 8 else 1
slow = float(slow)
sweep = [int(h) for h in sweep.split()]
NETWORKS = [("loopback", "loopback"), ("lan", "1 Gbit/s 0.5 ms"), ("wan", "100 Mbit/s 25 ms")]
COMPRESSIONS = ["none", "blockwise8"]


FAILED = []


def load(name):
    """The medians of NAME's runs: numbers, and lists of numbers element by element; the run-to-run
    spread of samples/s in "spread"."""
    runs = []
    for r in range(1, repeats + 1):
        with open(os.path.join(out, f"{name}.{r}.json")) as f:
            runs.append(json.load(f))
    ok = [r for r in runs if not r.get("failed")]
    if len(ok) < len(runs):
        FAILED.append(f"{name}: {len(runs) - len(ok)} of {len(runs)} runs failed")
    if not ok:
        return {"samples_per_second": 0.0, "eval_loss": float("nan"), "wire_bytes_per_sample": 0.0,
                "train_seconds": 0.0, "spread": "all failed"}
    med = {}
    for k, v in ok[0].items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            med[k] = statistics.median([r.get(k, 0) for r in ok])
        elif isinstance(v, list) and v and all(isinstance(x, (int, float)) for x in v):
            med[k] = [statistics.median(col) for col in zip(*[r.get(k, v) for r in ok])]
    xs = [r["samples_per_second"] for r in ok]
    med["spread"] = f"{min(xs):.1f}..{max(xs):.1f}"
    return med


def sps(r):
    return r["samples_per_second"]


def ratio(a, b):
    return sps(a) / sps(b) if sps(b) else 0.0


def compute_fraction(r):
    """Per stage: compute / (compute + wait), as the trainers saw each stage's calls."""
    c, w = r.get("stage_compute_seconds") or [], r.get("stage_wait_seconds") or []
    return [ci / (ci + wi) if ci + wi > 0 else 0.0 for ci, wi in zip(c, w)]


def busy_fraction(r):
    """Per stage: the share of its peers' training time spent computing (the rest they wait for
    work: for the network, for the trainer, or for the other stage)."""
    c, peers, t = r.get("stage_compute_seconds") or [], r.get("peers_per_stage") or [], r["train_seconds"]
    return [ci / (p * t) if p and t > 0 else 0.0 for ci, p in zip(c, peers)]


print(f"{steps} steps a run, medians of {repeats} alternated runs (spread min..max); workers per stage {counts} on "
      "both sides (gpipe: that many fixed pipelines); between regions as named, inside a region 1 Gbit/s 0.5 ms; "
      "region a: trainers + stage 0, region b: the other stages")
print(f"{'network':>18} {'compression':>11} {'swarm':>7} {'spread':>12} {'gpipe':>7} {'spread':>12} {'swarm/gpipe':>11} "
      f"{'bytes/sample':>12} {'eval swarm':>10} {'eval gpipe':>10}")
rows = []
for key, label in NETWORKS:
    for c in COMPRESSIONS:
        s, g = load(f"swarm-{key}-{c}"), load(f"gpipe-{key}-{c}")
        rows.append((label, c, sps(s), sps(g)))
        print(f"{label:>18} {c:>11} {sps(s):>7.1f} {s['spread']:>12} {sps(g):>7.1f} {g['spread']:>12} {ratio(s, g):>11.2f} "
              f"{s['wire_bytes_per_sample']:>12.0f} {s['eval_loss']:>10.4f} {g['eval_loss']:>10.4f}")
s, g = load("swarm-wan-blockwise8"), load("gpipe-wan-blockwise8")
ss, gs = load("swarm-wan-blockwise8-slow"), load("gpipe-wan-blockwise8-slow")
per = int(counts.split(",")[0])
cap = (per - 1 + 1 / slow) / per
print(f"\none peer slowed {slow:g}x, 100 Mbit/s 25 ms, blockwise8:")
print(f"  swarm slowed / swarm : {sps(ss):.1f} / {sps(s):.1f} = {ratio(ss, s):.2f}"
      f"  (stage 0's capacity {cap:.2f}x; goal >= 0.6)")
print(f"  gpipe slowed / gpipe : {sps(gs):.1f} / {sps(g):.1f} = {ratio(gs, g):.2f}"
      f"  (a step waits for the pipeline holding the slow peer)")
print(f"  swarm slowed / gpipe slowed: {ratio(ss, gs):.2f}")

print(f"\nsquare-cube sweep, 100 Mbit/s 25 ms between regions, no compression, {sweep_steps} x 1024 / hidden steps a run:")
print(f"{'hidden':>7} {'swarm':>7} {'gpipe':>7} {'swarm/gpipe':>11} {'bytes/sample':>12}   "
      "per stage: busy (compute / its peers' time) swarm | gpipe;  compute / (compute + wait) of the trainers' "
      "requests swarm | gpipe (wait = network + queue)")
fmt = lambda xs: " ".join(f"{x:.2f}" for x in xs)
sweep_rows = []
for h in sweep:
    s, g = load(f"swarm-h{h}"), load(f"gpipe-h{h}")
    bs, bg = busy_fraction(s), busy_fraction(g)
    sweep_rows.append((h, sps(s), sps(g), bs, bg))
    print(f"{h:>7} {sps(s):>7.1f} {sps(g):>7.1f} {ratio(s, g):>11.2f} {s['wire_bytes_per_sample']:>12.0f}   "
          f"{fmt(bs)} | {fmt(bg)};  {fmt(compute_fraction(s))} | {fmt(compute_fraction(g))}")

fig, ax = plt.subplots(figsize=(8, 4))
labels = [f"{n}\n{c}" for n, c, _, _ in rows]
x = range(len(rows))
ax.bar([i - 0.2 for i in x], [r[2] for r in rows], width=0.4, label="swarm")
ax.bar([i + 0.2 for i in x], [r[3] for r in rows], width=0.4, label="gpipe")
ax.set_xticks(list(x))
ax.set_xticklabels(labels, fontsize=7)
ax.set_ylabel("samples/s")
ax.set_title("swarm vs gpipe by link between regions and compression (bench/network.sh)")
ax.legend()
fig.tight_layout()
fig.savefig(os.path.join(docs, "network-table.png"), dpi=110)

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
hs = [r[0] for r in sweep_rows]
ax1.plot(hs, [r[1] for r in sweep_rows], "o-", label="swarm")
ax1.plot(hs, [r[2] for r in sweep_rows], "s-", label="gpipe")
ax1.set_xscale("log", base=2)
ax1.set_yscale("log")
ax1.set_xlabel("hidden size")
ax1.set_ylabel("samples/s")
ax1.set_title("throughput at 100 Mbit/s 25 ms")
ax1.legend()
stages = len(sweep_rows[0][3])
for st in range(stages):
    ax2.plot(hs, [r[3][st] for r in sweep_rows], "o-", label=f"swarm stage {st}")
    ax2.plot(hs, [r[4][st] for r in sweep_rows], "s--", label=f"gpipe stage {st}")
ax2.set_xscale("log", base=2)
ax2.set_ylim(0, 1.1)
ax2.set_xlabel("hidden size")
ax2.set_ylabel("busy: compute seconds / (peers x training seconds)")
ax2.set_title("square-cube: share of each stage's time computing")
ax2.legend(fontsize=7)
fig.tight_layout()
fig.savefig(os.path.join(docs, "network-sweep.png"), dpi=110)
print(f"\nplots: {docs}/network-table.png, {docs}/network-sweep.png")
print("failed runs: " + ("; ".join(FAILED) if FAILED else "none"))
