#!/usr/bin/env bash
# Soak: random faults from issue 11's fault matrix at a set rate on a 3-stage job
# (bench/jobs/soak-3stage.yaml, 2 workers per stage, checkpoints every step), then the same job
# undisturbed to the same number of steps. Prints figures and asserts one thing, the step invariant
# (exit 3 when a run's stages are not at the trainers' count of global batches, each difference
# accounted; worker/local/step_invariant.h):
#   steps; eval loss of both runs at equal steps and their ratio (goal within 3 %);
#   faults injected and samples lost per fault kind (the registry's samples_lost between a fault and
#   the next); deadlocks (a run, soak or undisturbed, still going at its wall-clock limit: it is
#   killed there and counted, never waited for); hangs (no optimizer step for HANG_SECONDS while the
#   run goes on); unaveraged steps (a peer that stepped without its group) and stale hand-offs taken
#   (gradients up to spec.averaging.maxHandoffLagSteps old, applied by a peer that took over a
#   leaving one's samples): the two ways a gradient older than its step can be applied; the job's
#   failure, if any; every stall (no optimizer step) longer than 2 x the median step time.
#
#   bench/soak.sh [MINUTES] [OUTDIR]      MINUTES default 30; FAULT_EVERY=S (default 30) sets the
#                                         rate, SEED=N the choice of faults, BUILD=dir the build;
#                                         SPREAD=1 adds a second undisturbed run to the same steps,
#                                         whose eval loss against the first's is the run-to-run
#                                         spread without faults (the swarm is asynchronous, so two
#                                         undisturbed runs of one spec differ too); LIMIT_SLACK=S
#                                         (default 300) is how far past MINUTES the soak may run
#                                         before it counts as a deadlock (an undisturbed run: 3 x
#                                         the soak's minutes + LIMIT_SLACK); HANG_SECONDS=S
#                                         (default 120)
# The eval loss is over the job's spec.training.evalBatches validation microbatches (64 here).
#
# Fault kinds (each followed by replacements started by hand, as an operator would):
#   kill_one    SIGKILL one worker; a replacement (`swarm worker --stage auto`) 3 s later
#   kill_half   SIGKILL one worker of every stage at once; replacements 3 s later
#   kill_stage  SIGKILL every worker of one stage at once (it comes back from its checkpoint)
#   freeze      SIGSTOP one worker for 15 s (longer than the 10 s forward timeout), then SIGCONT
#   term        SIGTERM one worker (it drains and hands its gradient off); a replacement 3 s later
set -euo pipefail
MINUTES=${1:-30}
OUT=${2:-$(mktemp -d /tmp/soak.XXXXXX)}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
# A folder of an earlier run would resume its checkpoints (swarm local restores from its log folder).
if [ -d "$OUT" ] && [ -n "$(ls -A "$OUT")" ]; then
  echo "bench/soak.sh: $OUT is not empty: its checkpoints would resume an earlier run; name a new folder" >&2; exit 2
fi
mkdir -p "$OUT"
export SWARM=$BUILD/bin/swarm JOB=$ROOT/bench/jobs/soak-3stage.yaml OUT MINUTES
export FAULT_EVERY=${FAULT_EVERY:-30} SEED=${SEED:-11} SPREAD=${SPREAD:-0}
export LIMIT_SLACK=${LIMIT_SLACK:-300} HANG_SECONDS=${HANG_SECONDS:-120}
export SWARM_JOB_SECRET=${SWARM_JOB_SECRET:-soak-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')}
[[ -x $SWARM ]] || { echo "build $SWARM first"; exit 1; }
echo "soak: $MINUTES min, a fault every $FAULT_EVERY s (seed $SEED), output in $OUT"
exec python3 - <<'PY'
import hashlib, hmac, json, os, random, signal, statistics, subprocess, sys, time, urllib.request

swarm, job, out = os.environ["SWARM"], os.environ["JOB"], os.environ["OUT"]
minutes, every, seed = float(os.environ["MINUTES"]), float(os.environ["FAULT_EVERY"]), int(os.environ["SEED"])
rng = random.Random(seed)
slack, hang_seconds = float(os.environ["LIMIT_SLACK"]), float(os.environ["HANG_SECONDS"])

def stop(proc, grace=30):
    """SIGTERM, then SIGKILL after `grace` s: a run at its limit is ended, never waited for."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()

def run_limited(args, stdout, limit):
    """(exit code, True when it hit `limit` seconds and was stopped)."""
    p = subprocess.Popen(args, stdout=stdout, stderr=subprocess.STDOUT)
    try:
        return p.wait(limit), False
    except subprocess.TimeoutExpired:
        stop(p)
        return p.returncode, True
logs = out + "/soak-logs"
launcher = subprocess.Popen([swarm, "local", job, "--max-seconds", str(int(minutes * 60)), "--summary",
                             out + "/soak.json", "--log-dir", logs, "--no-progress", "--checkpoint-every", "1"],
                            stdout=open(out + "/soak.out", "w"), stderr=subprocess.STDOUT)
mine = {}  # peer id -> Popen of the workers this script started
paused = set()

def procs():
    try:
        return json.load(open(logs + "/processes.json"))
    except Exception:
        return []

def registry_url():
    return next((p.get("url") for p in procs() if p.get("role") == "registry"), None)

# Requests to the registry are signed with the job secret (registry/request_auth.h); the key is
# HKDF-SHA256(secret, "", "swarm registry v1"), derived by OpenSSL.
registry_key = bytes.fromhex(subprocess.run(
    ["openssl", "kdf", "-keylen", "32", "-kdfopt", "digest:SHA256", "-kdfopt", "key:" + os.environ["SWARM_JOB_SECRET"],
     "-kdfopt", "salt:", "-kdfopt", "info:swarm registry v1", "HKDF"],
    capture_output=True, text=True, check=True).stdout.strip().replace(":", ""))

def signed(method, target, body=b""):
    ts, nonce = str(int(time.time() * 1000)), os.urandom(16).hex()
    text = "\n".join(["SWARM-REG-V1", method, target, ts, nonce, hashlib.sha256(body).hexdigest()])
    return "SwarmHMAC ts=%s,nonce=%s,sig=%s" % (ts, nonce, hmac.new(registry_key, text.encode(), hashlib.sha256).hexdigest())

def get(path):
    try:
        req = urllib.request.Request(registry_url() + path, headers={"Authorization": signed("GET", path)})
        with urllib.request.urlopen(req, timeout=3) as r:
            return json.load(r)
    except Exception:
        return None

def pid_of(peer):
    if peer in mine:
        return mine[peer].pid if mine[peer].poll() is None else None
    for p in procs():
        if p.get("name") == "worker " + peer:
            return p["pid"]
    return None

def live_workers():  # peer id -> stage, as discovery sees them (frozen ones excluded)
    r = get("/v1/peers?role=worker") or {"peers": []}
    return {p["peerId"]: p["stage"] for p in r["peers"] if p["peerId"] not in paused and pid_of(p["peerId"])}

def replace(n, delay=3):
    time.sleep(delay)
    ckpt = next((p.get("checkpoints") for p in procs() if p.get("role") == "registry"), "")
    for _ in range(n):
        peer = "soak-r%d" % len(mine)
        args = [swarm, "--log-level", "info", "worker", "--job", job, "--stage", "auto", "--peer-id", peer,
                "--registry", registry_url(), "--threads", "1", "--drain-seconds", "10"]
        if ckpt:
            args += ["--checkpoint-dir", ckpt, "--checkpoint-every", "1"]
        mine[peer] = subprocess.Popen(args, stdout=open("%s/%s.log" % (logs, peer), "w"), stderr=subprocess.STDOUT)
        time.sleep(0.5)

def steps_now():
    try:
        return json.load(open(logs + "/trainer0.json")).get("steps", 0)
    except Exception:
        return 0

def samples_lost():
    s = get("/v1/stats")
    return s["events"].get("samples_lost", 0) if s else None

faults, lost_by_kind, count_by_kind = [], {}, {}
step_times, last_steps = [], -1
start = time.time()
next_fault = start + 20 + every  # let training start first
current_kind, lost_at_fault = None, 0

def settle_attribution():
    global current_kind, lost_at_fault
    now_lost = samples_lost()
    if current_kind is not None and now_lost is not None:
        lost_by_kind[current_kind] = lost_by_kind.get(current_kind, 0) + now_lost - lost_at_fault
    if now_lost is not None:
        lost_at_fault = now_lost

deadline = start + minutes * 60 + slack
deadlocks, hangs, hang_open, last_step_at = 0, [], False, start
while launcher.poll() is None:
    if time.time() > deadline:  # still running at its limit: counted, then ended
        deadlocks += 1
        print("soak: DEADLOCK: the run is still going %.0f s past its %g min; stopping it" % (slack, minutes), flush=True)
        stop(launcher)
        break
    s = steps_now()
    if s != last_steps:
        step_times.append((time.time() - start, s))
        last_steps, last_step_at, hang_open = s, time.time(), False
    elif s > 0 and not hang_open and time.time() - last_step_at > hang_seconds:
        hang_open = True  # one hang per stretch without a step
        hangs.append({"t": round(time.time() - start, 1), "step": s})
        print("soak: HANG: no step for %.0f s after step %d" % (hang_seconds, s), flush=True)
    if time.time() >= next_fault and time.time() - start < minutes * 60 - 30:
        workers = live_workers()
        if workers:
            settle_attribution()
            kind = rng.choice(["kill_one", "kill_half", "kill_stage", "freeze", "term"])
            by_stage = {}
            for p, st in workers.items():
                by_stage.setdefault(st, []).append(p)
            if kind == "kill_one":
                victims = [rng.choice(sorted(workers))]
            elif kind == "kill_half":
                victims = [rng.choice(sorted(v)) for v in by_stage.values()]
            elif kind == "kill_stage":
                victims = sorted(by_stage[rng.choice(sorted(by_stage))])
            else:
                victims = [rng.choice(sorted(workers))]
            sig = {"freeze": signal.SIGSTOP, "term": signal.SIGTERM}.get(kind, signal.SIGKILL)
            for v in victims:
                pid = pid_of(v)
                if pid:
                    os.kill(pid, sig)
            faults.append({"t": round(time.time() - start, 1), "kind": kind, "victims": victims, "step": s})
            count_by_kind[kind] = count_by_kind.get(kind, 0) + 1
            current_kind = kind
            print("soak: t=%5.0f s step %d: %s %s" % (time.time() - start, s, kind, " ".join(victims)), flush=True)
            if kind == "freeze":
                paused.update(victims)
                time.sleep(15)
                for v in victims:
                    pid = pid_of(v)
                    if pid:
                        os.kill(pid, signal.SIGCONT)
                paused.difference_update(victims)
            else:
                replace(len(victims))
        next_fault = time.time() + every
    time.sleep(0.5)
for p in mine.values():
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
for p in mine.values():
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()
try:
    soak = json.load(open(out + "/soak.json"))
except Exception as e:  # a run stopped at its limit may have written none: then the figures are 0
    soak = {"failure": {"reason": "no summary (%s)" % e}}
if current_kind is not None:  # the registry is gone now: the run's total closes the last fault's count
    lost_by_kind[current_kind] = lost_by_kind.get(current_kind, 0) + soak.get("samples_lost", 0) - lost_at_fault
steps = soak.get("steps", 0)
print("soak: launcher exit %s; undisturbed run to step %d ..." % (launcher.returncode, steps), flush=True)
base_limit = 3 * minutes * 60 + slack
base_rc, base_dead = run_limited([swarm, "local", job, "--steps", str(steps), "--summary", out + "/base.json",
                                  "--log-dir", out + "/base-logs", "--no-progress", "--checkpoint-every", "1"],
                                 open(out + "/base.out", "w"), base_limit)
deadlocks += base_dead
base = json.load(open(out + "/base.json")) if os.path.exists(out + "/base.json") else {}
base2, base2_rc = {}, None
if os.environ.get("SPREAD") == "1":
    print("soak: a second undisturbed run to step %d ..." % steps, flush=True)
    base2_rc, base2_dead = run_limited([swarm, "local", job, "--steps", str(steps), "--summary", out + "/base2.json",
                                        "--log-dir", out + "/base2-logs", "--no-progress", "--checkpoint-every", "1"],
                                       open(out + "/base2.out", "w"), base_limit)
    deadlocks += base2_dead
    base2 = json.load(open(out + "/base2.json")) if os.path.exists(out + "/base2.json") else {}

gaps = [(b[0] - a[0], a) for a, b in zip(step_times, step_times[1:]) if b[1] > a[1] and a[1] > 0]
median = statistics.median([g for g, _ in gaps]) if gaps else 0
stalls = [(round(a[0], 1), a[1], round(g, 1)) for g, a in gaps if median and g > 2 * median]
print()
print("soak (%g min, %d faults, seed %d): launcher exit %s, %s" % (minutes, len(faults), seed, launcher.returncode,
      "FAILED: " + json.dumps(soak["failure"]) if "failure" in soak else "no failure"))
print("  steps                %d (undisturbed run to the same steps: %d, exit %d)" % (steps, base.get("steps", 0), base_rc))
el, bl = soak.get("eval_loss", 0), base.get("eval_loss", 0)
print("  eval loss            soak %.4f, undisturbed %.4f, ratio %.4f (goal within 3 %%)" % (el, bl, el / bl if bl else 0))
if base2_rc is not None:
    b2 = base2.get("eval_loss", 0)
    mean = (bl + b2) / 2
    print("  undisturbed spread   second undisturbed run %.4f (exit %d): ratio to the first %.4f; soak / mean of both %.4f" % (
          b2, base2_rc, b2 / bl if bl else 0, el / mean if mean else 0))
print("  deadlocks            %d (runs still going at their limit: soak %g min + %g s, undisturbed %g s)" % (
      deadlocks, minutes, slack, base_limit))
print("  hangs                %d (no step for %g s: %s)" % (len(hangs), hang_seconds, json.dumps(hangs)))
print("  stale gradients      unaveraged steps %d (a peer stepping without its group); stale hand-offs taken %d "
      "(%d samples, each at most spec.averaging.maxHandoffLagSteps old)" % (
      soak.get("unaveraged_steps", -1), soak.get("stale_handoffs_taken", -1), soak.get("stale_handoff_samples", -1)))
if soak.get("events_unacknowledged"):
    print("  events unacknowledged %s (counted by workers, never confirmed by the registry)" % json.dumps(soak["events_unacknowledged"]))
print("  faults               %s" % json.dumps(count_by_kind))
print("  samples lost by kind %s (total samples_lost %d, microbatches_lost %d, peers_lost %d)" % (
      json.dumps(lost_by_kind), soak.get("samples_lost", 0), soak.get("microbatches_lost", 0), soak.get("peers_lost", 0)))
print("  restores/resyncs     checkpoint_restores %d, checkpoint_steps_lost %d, stage_steps_lost %d, resyncs %d, handoffs %d" % (
      soak.get("checkpoint_restores", 0), soak.get("checkpoint_steps_lost", 0), soak.get("stage_steps_lost", 0),
      soak.get("resyncs", 0), soak.get("handoffs", 0)))
print("  stage steps          %s, spread %s" % (json.dumps(soak.get("stage_steps", {})), soak.get("stage_step_spread", "-")))
def invariant_line(name, run):
    # One global batch is one step for every stage (worker/local/step_invariant.h): each stage's
    # extra samples (global batch x step + its open step's claims - the samples the trainers
    # completed) is 0 without faults, and within what the faults account for with them.
    inv = run.get("step_invariant")
    if not isinstance(inv, dict):
        return "  step invariant %-6s - (no step_invariant in the summary)" % name
    extra = {s: st.get("extra_samples") for s, st in inv.get("stages", {}).items()}
    acc = inv.get("accounted_samples", {})
    return ("  step invariant %-6s %s: completed global batches %d (%d samples); extra samples per stage %s, "
            "accounted %d (%s), may take away %d; steps short %d (%d samples), over %d (%d samples)" % (
            name, "ok" if inv.get("ok") else "BAD", inv.get("completed_global_batches", -1),
            inv.get("completed_samples", -1), json.dumps(extra), acc.get("total", 0),
            ", ".join("%s %d" % (k, v) for k, v in acc.items() if k not in ("total", "may_take_away") and v),
            acc.get("may_take_away", 0), run.get("steps_short", 0), run.get("step_samples_short", 0),
            run.get("steps_over", 0), run.get("step_samples_over", 0)))
print(invariant_line("soak", soak))
print(invariant_line("undisturbed", base))
print("  median step time     %.2f s; stalls > 2x: %d" % (median, len(stalls)))
for t, st, g in stalls:
    kinds = [f["kind"] for f in faults if t - 20 <= f["t"] <= t + g]  # during the stall or just before
    print("    at t=%6.1f s after step %d: %.1f s without a step (faults during or just before: %s)" % (t, st, g, ",".join(kinds) or "none"))
json.dump({"faults": faults, "lost_by_kind": lost_by_kind, "stalls": stalls, "deadlocks": deadlocks, "hangs": hangs,
           "soak": soak, "base": base, "base2": base2},
          open(out + "/soak-report.json", "w"), indent=2)
# The one thing the soak asserts (issue 29): one global batch is one step for every stage, in both
# runs, each difference accounted. A broken invariant exits 3 (the figures above say where).
broken = [name for name, run in (("soak", soak), ("undisturbed", base))
          if not (isinstance(run.get("step_invariant"), dict) and run["step_invariant"].get("ok"))]
if broken:
    print("STEP INVARIANT BROKEN in: %s" % ", ".join(broken))
    sys.exit(3)
PY
