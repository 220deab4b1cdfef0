#!/usr/bin/env python3
"""Set the training part of the SwarmJob `swarm job from-hf` wrote for examples/smollm2/run.sh.

    python examples/smollm2/tune_job.py JOB.yaml [--steps N] [--global-batch B] [--microbatch M]

from-hf sets the model, spec.model.init, the stages, the tokenizer.json and the data; this sets
what is the demo's choice: a short fine-tune (maxSteps, the batch, a cosine schedule with a short
warm-up, one step's microbatches in flight), the data read as a token file, and 2 validation
microbatches at the end. Rewrites the file
(PyYAML: from-hf's comments are not kept).
"""

import argparse
import sys

import yaml


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("job")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--global-batch", type=int, default=8)
    ap.add_argument("--microbatch", type=int, default=4)
    a = ap.parse_args(argv)
    with open(a.job) as f:
        job = yaml.safe_load(f)
    t = job["spec"]["training"]
    t.update({"maxSteps": a.steps, "globalBatch": a.global_batch, "microbatch": a.microbatch, "evalBatches": 2})
    t["dataset"]["format"] = "tokens"
    t["schedule"] = {"kind": "cosine", "warmupSteps": min(3, a.steps), "minLearningRateRatio": 0.1}
    # One step's microbatches in flight, no more: on 2 cores a 135 M model's step takes tens of
    # seconds, and microbatches of the next step sent early wait past their activations' deadline
    # at the first stage (dropped, then computed again).
    job["spec"].setdefault("trainers", {})["inflightMicrobatches"] = max(1, a.global_batch // a.microbatch)
    with open(a.job, "w") as f:
        yaml.safe_dump(job, f, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
