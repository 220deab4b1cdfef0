"""The pipeline benchmark's driver (bench/vs-pytorch-pipeline.sh runs it): `swarm local` and the
PyTorch pipeline (rank.py under ScheduleGPipe and Schedule1F1B) on the same job, the same cores and
the same initial weights, alternating (swarm, gpipe, 1f1b, swarm, ...), REPEATS times each. Samples
each run's processes' proportional set size (PSS) every 0.2 s and keeps the peak of their sum.
Prints a table per run and the medians; every run's raw JSON stays in the output folder.

Runs under the benchmark's virtual environment (for PyYAML) but never imports torch itself: its
memory is nobody's, and the ranks it starts are measured on their own.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from job import JobError, load_job, threads_per_stage, usable_cores  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLE_SECONDS = 0.2
KINDS = ("swarm", "gpipe", "1f1b")


class RunFailed(RuntimeError):
    pass


# ---- memory ----

def _children():
    """{ppid: [pid, ...]} of every process now."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # gone meanwhile
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])  # the fields after "(comm)": state, ppid
        out.setdefault(ppid, []).append(int(name))
    return out


def _pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass  # exited meanwhile
    return 0


def _describe(pid):
    """A process in a word or two: its name and, for the swarm and Python, its role argument."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().decode(errors="replace").split("\0")
    except OSError:
        return "?"
    name = os.path.basename(argv[0])
    roles = [a for a in argv[1:] if a in ("local", "registry", "worker", "trainer")]
    if name == "swarm" and roles:
        peer = argv[argv.index("--peer-id") + 1] if "--peer-id" in argv[:-1] else ""
        return f"swarm {roles[0]} {peer}".strip()
    if "--rank" in argv[:-1]:
        return f"rank {argv[argv.index('--rank') + 1]}"
    return name


def tree_pss_kib(roots):
    """{pid: PSS in KiB} of `roots` and all their descendants."""
    children, seen, todo = _children(), set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            todo += children.get(pid, [])
    return {p: _pss_kib(p) for p in seen}


def stop(procs):
    """SIGTERM to those of `procs` still running (swarm local stops its children on it), then waits."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        p.wait()


def wait_sampling(procs, what, timeout):
    """Waits for every process in `procs`, sampling their trees' PSS every SAMPLE_SECONDS; returns
    the peak of the sum (MiB) and what each process had at that moment ({"name (pid)": MiB}).
    A process that fails stops the others (they would wait for it until gloo's timeout); so does
    the driver's own interruption."""
    peak, at_peak, names, deadline = 0, {}, {}, time.monotonic() + timeout
    try:
        while True:
            pss = tree_pss_kib([p.pid for p in procs if p.poll() is None])
            for pid in pss.keys() - names.keys():
                names[pid] = _describe(pid)
            if sum(pss.values()) > peak:
                peak, at_peak = sum(pss.values()), pss
            codes = [p.poll() for p in procs]
            if all(c is not None for c in codes):
                break
            if any(c not in (None, 0) for c in codes) or time.monotonic() > deadline:
                stop(procs)
                why = "timed out" if time.monotonic() > deadline else f"exit codes {[p.returncode for p in procs]}"
                raise RunFailed(f"{what}: {why}")
            time.sleep(SAMPLE_SECONDS)
    except BaseException:
        stop(procs)
        raise
    if any(p.returncode for p in procs):
        raise RunFailed(f"{what}: exit codes {[p.returncode for p in procs]}")
    return peak / 1024.0, {f"{names[pid]} ({pid})": kib / 1024.0 for pid, kib in at_peak.items()}


# ---- the runs ----

def tail(path, lines=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def run_swarm(a, job_file, threads, global_batch, eval_batches, out, i, timeout):
    summary, log = f"{out}/swarm-{i}.summary.json", f"{out}/swarm-{i}.log"
    # No checkpoints: the PyTorch side writes none either (swarm local's default with one worker per
    # stage keeps one every 10 steps).
    cmd = [a.swarm, "local", job_file, "--steps", str(a.steps), "--summary", summary, "--no-progress",
           "--threads", str(threads), "--no-checkpoints", "--log-dir", f"{out}/swarm-{i}-logs"]
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)
    try:
        peak, by_process = wait_sampling([proc], f"swarm run {i}", timeout)
    except RunFailed as e:
        raise RunFailed(f"{e}; {' '.join(cmd)}\n{tail(log)}") from None
    with open(summary) as f:
        s = json.load(f)
    if not s.get("finished"):
        raise RunFailed(f"swarm run {i} did not finish its {a.steps} steps; {log}\n{tail(log)}")
    return {"kind": "swarm", "samples_per_second": s["samples_per_second"],
            "step_samples_per_second": a.steps * global_batch / s["train_seconds"],
            "loss_first": s["loss_first"], "loss_last": step_loss(s, a.steps, global_batch),
            "eval_loss": s["eval_loss"] if eval_batches else None, "train_seconds": s["train_seconds"], "samples": s["samples"],
            "steps": s["steps"], "peak_pss_mib": peak, "peak_pss_by_process_mib": by_process, "command": cmd,
            "summary": s}


def step_loss(summary, step, global_batch):
    """The mean training loss of step `step`'s microbatches (1-based), out of the trainer's loss
    curve of (samples done, microbatch loss). Not the summary's loss_last: that is the mean of the
    last globalBatch samples to finish, and after step N the trainer's lanes still finish the
    microbatches they had in flight (up to inflightMicrobatches of them, on the final weights)."""
    window = [loss for done, loss in summary.get("loss_curve", [])
              if (step - 1) * global_batch < done <= step * global_batch]
    return sum(window) / len(window) if window else None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_pipeline(a, kind, plan_file, stages, out, i, timeout):
    result = f"{out}/{kind}-{i}.result.json"
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), GLOO_SOCKET_IFNAME="lo")
    procs, logs = [], []
    for r in range(stages):
        logs.append(f"{out}/{kind}-{i}-rank{r}.log")
        cmd = [a.python, f"{HERE}/rank.py", "--plan", plan_file, "--rank", str(r), "--schedule", kind,
               "--result", result]
        with open(logs[-1], "w") as f:
            procs.append(subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env))
    try:
        peak, by_process = wait_sampling(procs, f"{kind} run {i}", timeout)
    except RunFailed as e:
        raise RunFailed(f"{e}\n" + "\n".join(f"{log}:\n{tail(log)}" for log in logs)) from None
    with open(result) as f:
        r = json.load(f)
    r["peak_pss_mib"], r["peak_pss_by_process_mib"] = peak, by_process
    return r


# ---- setup ----

def pinned_job(job, path, threads, out):
    """A copy of the manifest pinned to what the PyTorch side does: the CPU, float32, `threads`
    torch threads per worker (the same settings `auto` and 0 resolve to on a machine without a GPU)."""
    with open(path) as f:
        doc = yaml.safe_load(f)
    workers = doc["spec"].setdefault("workers", {}) or {}
    workers.update({"device": "cpu", "precision": "fp32", "threads": threads})
    doc["spec"]["workers"] = workers
    dst = f"{out}/job.yaml"
    with open(dst, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    return dst


def export_initial(swarm, job_file, out):
    """The job's initial parameters, as the swarm's stages initialize them (step 0)."""
    dst = f"{out}/initial/model.safetensors"
    r = subprocess.run([swarm, "export", "--initial", "--job", job_file, "--out", dst],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise RunFailed(f"swarm export --initial failed:\n{r.stdout}")
    return dst


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--job", required=True, help="the SwarmJob manifest")
    p.add_argument("--steps", required=True, type=int, help="optimizer steps per run")
    p.add_argument("--repeats", required=True, type=int, help="runs of each kind")
    p.add_argument("--swarm", required=True, help="the swarm binary")
    p.add_argument("--python", required=True, help="the Python that runs the ranks (the torch venv's)")
    p.add_argument("--out", required=True, help="a folder for the raw results and logs")
    p.add_argument("--run-timeout", type=float, default=1800, help="seconds one run may take")
    a = p.parse_args()
    for name in ("steps", "repeats"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be >= 1, got {getattr(a, name)}")
    return a


# ---- report ----

def fmt(v, spec):
    return "-" if v is None else format(v, spec)


COLUMNS = (("samples_per_second", "samples/s", ".1f", 10), ("step_samples_per_second", "in steps", ".1f", 9),
           ("loss_first", "loss step 1", ".4f", 12), ("loss_last", "loss step N", ".4f", 12),
           ("eval_loss", "eval loss", ".4f", 10), ("peak_pss_mib", "peak PSS MiB", ".0f", 13))


def row(label, kind, values):
    return f"{label:>7} {kind:<6}" + "".join(f" {fmt(values[k], f):>{w}}" for k, _, f, w in COLUMNS)


def report(job, a, threads, runs):
    print(f"job {job['path']} ({job['name']}): {job['model']['num_stages']} stages, hidden "
          f"{job['model']['hidden_size']}, {job['global_batch'] // job['microbatch']} microbatches of "
          f"{job['microbatch']} per step; N = {a.steps} steps, {a.repeats} run(s) of each, alternating; "
          f"{threads} torch thread(s) per stage, {usable_cores()} cores")
    print(f"{'run':>7} {'kind':<6}" + "".join(f" {h:>{w}}" for _, h, _, w in COLUMNS))
    for r in runs:
        print(row(r["repeat"], r["kind"], r))
    med = {}
    for kind in KINDS:
        rs = [r for r in runs if r["kind"] == kind]
        med[kind] = {k: statistics.median(r[k] for r in rs) if all(r[k] is not None for r in rs) else None
                     for k, _, _, _ in COLUMNS}
        print(row("median", kind, med[kind]))
    for key, what in (("samples_per_second", "samples/s"), ("step_samples_per_second", "in steps")):
        best = max(("gpipe", "1f1b"), key=lambda k: med[k][key])
        print(f"swarm / max(gpipe, 1f1b), {what}: {med['swarm'][key] / med[best][key]:.3f} "
              f"(medians; {best} is the faster schedule)")
    print("samples/s: the samples each run trained on over its training seconds, counted as the swarm's\n"
          "  trainer counts them (the first step included; the swarm's trainer also finishes the microbatches\n"
          "  it had in flight after step N); in steps: N x globalBatch over the same seconds.\n"
          "loss step 1, step N: the mean training loss of that step's microbatches (the same batches on\n"
          "  every side); eval loss: after the N steps, over evalBatches fixed validation microbatches.")
    return med


def main():
    a = parse_args()
    # A SIGTERM to the driver ends the run in progress too (wait_sampling stops its processes).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        job = load_job(a.job)
    except (JobError, OSError, yaml.YAMLError) as e:
        sys.exit(f"bench/vs-pytorch-pipeline.sh: JOB: {e}")
    if job["compression"] != "none":
        print(f"note: spec.pipeline.compression is {job['compression']}: the swarm compresses activations, "
              "the PyTorch pipeline sends them in float32", file=sys.stderr)
    os.makedirs(a.out, exist_ok=True)
    threads = threads_per_stage(job)
    job_file = pinned_job(job, a.job, threads, a.out)
    stages = job["model"]["num_stages"]
    plan_file = f"{a.out}/plan.json"
    runs = []
    try:
        initial = export_initial(a.swarm, job_file, a.out)
        with open(plan_file, "w") as f:
            json.dump({"job": job, "steps": a.steps, "threads": threads, "initial": initial}, f, indent=1)
        for i in range(1, a.repeats + 1):
            for kind in KINDS:
                t0 = time.monotonic()
                if kind == "swarm":
                    r = run_swarm(a, job_file, threads, job["global_batch"], job["eval_batches"], a.out, i,
                                  a.run_timeout)
                else:
                    r = run_pipeline(a, kind, plan_file, stages, a.out, i, a.run_timeout)
                r["repeat"] = i
                with open(f"{a.out}/{kind}-{i}.json", "w") as f:
                    json.dump(r, f, indent=1)
                runs.append(r)
                print(f"  {kind} run {i}: {r['samples_per_second']:.1f} samples/s, loss {fmt(r['loss_last'], '.4f')}, "
                      f"peak PSS {r['peak_pss_mib']:.0f} MiB ({time.monotonic() - t0:.0f} s)", file=sys.stderr)
    except RunFailed as e:
        sys.exit(f"bench/vs-pytorch-pipeline.sh: {e}")
    med = report(job, a, threads, runs)
    with open(f"{a.out}/medians.json", "w") as f:
        json.dump(med, f, indent=1)
    shutil.rmtree(f"{a.out}/initial", ignore_errors=True)  # the weights are the job's to re-export
    print(f"raw results: {a.out}")


if __name__ == "__main__":
    main()
