"""What the PyTorch side of the pipeline benchmark needs of a SwarmJob manifest.

Reads the fields with common/job_spec.h's defaults (a field left out means what it means to the
swarm), refuses the configurations that have no counterpart in a one-process-per-stage PyTorch
pipeline (several workers per stage, several trainers, LAMB, reduced precision), and computes what
both sides share: the torch threads per stage and the learning rate of each step.
"""

import math
import os

import yaml


class JobError(ValueError):
    """A manifest the benchmark cannot run; the message names the field."""


def _get(node, path, default):
    for key in path.split("."):
        if not isinstance(node, dict) or node.get(key) is None:
            return default
        node = node[key]
    return node


def load_job(path):
    """The manifest at `path` as a plain dict of the settings the benchmark uses."""
    with open(path) as f:
        doc = yaml.safe_load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get("spec"), dict):
        raise JobError(f"{path}: not a SwarmJob manifest (no spec)")
    spec = doc["spec"]

    def g(p, d):
        return _get(spec, p, d)

    betas = g("training.optimizer.betas", [0.9, 0.95])
    job = {
        "path": path,
        "name": _get(doc, "metadata.name", os.path.basename(path)),
        "model": {
            "vocab_size": int(g("model.vocabSize", 256)),
            "hidden_size": int(g("model.hiddenSize", 192)),
            "num_heads": int(g("model.numHeads", 6)),
            "layers_per_stage": int(g("model.layersPerStage", 2)),
            "sequence_length": int(g("model.sequenceLength", 128)),
            "mlp_ratio": int(g("model.mlpRatio", 4)),
            "num_stages": int(g("pipeline.stages", 2)),
            "shared_layers": bool(g("model.sharedLayers", False)),
        },
        "compression": str(g("pipeline.compression", "none")),
        "global_batch": int(g("training.globalBatch", 64)),
        "microbatch": int(g("training.microbatch", 8)),
        "max_steps": int(g("training.maxSteps", 300)),
        "eval_batches": int(g("training.evalBatches", 8)),
        "seed": int(g("training.seed", 1)),
        "tokenizer": str(g("training.tokenizer.kind", "bytes")),
        "dataset": {
            "path": str(g("training.dataset.path", "/usr/share/games/fortunes")),
            "format": str(g("training.dataset.format", "auto")),
            "text_field": str(g("training.dataset.textField", "text")),
            "validation_fraction": float(g("training.dataset.validationFraction", 0.02)),
        },
        "optimizer": {
            "name": str(g("training.optimizer.name", "adamw")),
            "lr": float(g("training.optimizer.learningRate", 0.002)),
            "beta1": float(betas[0]),
            "beta2": float(betas[1]),
            "eps": float(g("training.optimizer.epsilon", 1.0e-8)),
            "weight_decay": float(g("training.optimizer.weightDecay", 0.01)),
            "grad_clip": float(g("training.optimizer.gradClip", 1.0)),
        },
        "schedule": {
            "kind": str(g("training.schedule.kind", "cosine")),
            "warmup_steps": int(g("training.schedule.warmupSteps", 10)),
            "min_lr_ratio": float(g("training.schedule.minLearningRateRatio", 0.1)),
        },
        "workers_per_stage": int(g("workers.perStage", 1)),
        "device": str(g("workers.device", "auto")),
        "precision": str(g("workers.precision", "auto")),
        "threads": int(g("workers.threads", 0)),
        "trainers": int(g("trainers.count", 1)),
    }
    _check(job)
    return job


def _check(job):
    def refuse(field, why):
        raise JobError(f"{job['path']}: {field}: {why}")

    if job["workers_per_stage"] != 1:
        refuse("spec.workers.perStage", f"is {job['workers_per_stage']}; the comparison runs one process "
               "per stage on both sides (set it to 1)")
    if job["trainers"] != 1:
        refuse("spec.trainers.count", f"is {job['trainers']}; one pipeline drives the microbatches here (set it to 1)")
    if job["optimizer"]["name"] != "adamw":
        refuse("spec.training.optimizer.name", f"is {job['optimizer']['name']}; the PyTorch side runs "
               "torch.optim.AdamW (set it to adamw)")
    if job["precision"] not in ("auto", "fp32"):
        refuse("spec.workers.precision", f"is {job['precision']}; the comparison is in float32 (auto or fp32)")
    if job["device"] not in ("auto", "cpu"):
        refuse("spec.workers.device", f"is {job['device']}; the comparison runs on the CPU (auto or cpu)")
    if job["global_batch"] % job["microbatch"]:
        refuse("spec.training.globalBatch", f"{job['global_batch']} is not a multiple of microbatch {job['microbatch']}")
    if job["schedule"]["kind"] not in ("constant", "linear", "cosine"):
        refuse("spec.training.schedule.kind", f"unknown kind {job['schedule']['kind']}")


def _quota_cores():
    """Cores the cgroup's CPU quota allows (v2 cpu.max, else v1 cfs quota / period), rounded up;
    None when unlimited or unreadable."""
    def read(path):
        try:
            with open(path) as f:
                return f.read().split()
        except OSError:
            return []

    def cores(quota, period):
        try:
            q, p = float(quota), float(period)
        except ValueError:
            return None  # "max": no limit
        return max(1, math.ceil(q / p - 1e-9)) if q > 0 and p > 0 else None

    v2 = read("/sys/fs/cgroup/cpu.max")
    v1 = read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") + read("/sys/fs/cgroup/cpu/cpu.cfs_period_us")
    return (cores(*v2) if len(v2) == 2 else None) or (cores(*v1) if len(v1) == 2 else None)


def usable_cores():
    """The cores this process is given, as common/cpu_cores.cc counts them: the CPUs of its
    affinity mask, capped by its cgroup's CPU quota, at least 1."""
    cores = len(os.sched_getaffinity(0)) or os.cpu_count() or 1
    quota = _quota_cores()
    return max(1, min(cores, quota) if quota else cores)


def threads_per_stage(job, cores=None):
    """Torch intra-op threads of each stage: what `swarm local` gives each worker
    (worker/local/launcher.cc): spec.workers.threads, else cores / workers, at least 1."""
    if job["threads"] > 0:
        return job["threads"]
    cores = cores or usable_cores()
    return max(1, cores // (job["model"]["num_stages"] * job["workers_per_stage"]))


def lr_at(job, step):
    """The learning rate of optimizer step `step` (0-based), as worker/model/optimizer.cc's lr_at:
    linear warmup, then constant, linear or cosine decay to lr * minLearningRateRatio at
    spec.training.maxSteps (the manifest's, not the benchmark's step count)."""
    lr, s = job["optimizer"]["lr"], job["schedule"]
    warmup, max_steps = s["warmup_steps"], job["max_steps"]
    step = max(step, 0)
    if warmup > 0 and step < warmup:
        return lr * (step + 1) / warmup
    if s["kind"] == "constant" or max_steps <= warmup:
        return lr
    progress = min(1.0, max(0.0, (step - warmup) / (max_steps - warmup)))
    m = s["min_lr_ratio"]
    if s["kind"] == "linear":
        return lr * (1.0 - (1.0 - m) * progress)
    return lr * (m + (1.0 - m) * 0.5 * (1.0 + math.cos(math.pi * progress)))
