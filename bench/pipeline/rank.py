"""One rank of the PyTorch pipeline: stage `rank` of the job's model under
torch.distributed.pipelining (ScheduleGPipe or Schedule1F1B), gloo on the loopback, one process
per stage. The driver (driver.py) starts one per stage with MASTER_ADDR/MASTER_PORT set.

What it mirrors of the swarm, so that throughput and loss compare:
  * the model and its initial weights: model.py, loaded from `swarm export --initial`'s file;
  * the data: the trainer's microbatches in the trainer's order (data.py), a step's
    globalBatch / microbatch of them as the schedule's microbatches;
  * the gradient: each microbatch's mean loss, averaged over the step's microbatches (the schedule's
    scale_grads), as the swarm's stages sum loss * samples and divide by the step's samples;
  * the optimizer (worker/model/optimizer.cc): the stage's own global gradient norm clipped to
    gradClip (coefficient gradClip / (norm + 1e-6), only above the limit; a non-finite norm skips
    the update), then torch.optim.AdamW, weight decay on matrices outside the embedding only,
    the learning rate of job.lr_at each step;
  * samples/s as the swarm's trainer counts it (trainer.cc): samples over the seconds from the
    first step's start (every stage up) to the last step's end, the first step included;
  * the eval loss: the mean loss of the first evalBatches fixed validation microbatches.
The last rank writes the run's result JSON.

  rank.py --plan PLAN.json --rank R --schedule gpipe|1f1b --result RESULT.json
"""

import argparse
import datetime
import json
import math
import os
import sys
import time
import warnings

# PyPI's torch does not depend on NumPy and nothing here uses it: silence the import's warning.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from data import BatchSampler, Dataset  # noqa: E402
from job import lr_at  # noqa: E402
from model import ModelShape, SafetensorsFile, Stage, lm_loss  # noqa: E402

SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--plan", required=True, help="the driver's plan JSON (job, steps, threads, initial weights)")
    p.add_argument("--rank", required=True, type=int, help="this process's rank = its stage")
    p.add_argument("--schedule", required=True, choices=sorted(SCHEDULES), help="the pipeline schedule")
    p.add_argument("--result", required=True, help="where the last rank writes the run's result JSON")
    return p.parse_args()


def optimizer_of(stage, job):
    """torch.optim.AdamW with the swarm's decay groups: matrices outside the embedding decay."""
    o = job["optimizer"]
    decay = [p for n, p in stage.named_parameters() if p.dim() >= 2 and not n.startswith("embed.")]
    other = [p for n, p in stage.named_parameters() if not (p.dim() >= 2 and not n.startswith("embed."))]
    groups = [{"params": decay, "weight_decay": o["weight_decay"]}, {"params": other, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"], foreach=False)


def clip_and_step(stage, optimizer, lr, grad_clip):
    """The swarm's StageOptimizer::step around torch's AdamW. Returns the gradient norm."""
    grads = [p.grad for p in stage.parameters() if p.grad is not None]
    norm = torch.stack([g.norm(2) for g in grads]).norm(2).item() if grads else 0.0
    if math.isfinite(norm):
        if grad_clip > 0 and norm > grad_clip:
            coef = grad_clip / (norm + 1e-6)
            for g in grads:
                g.mul_(coef)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.step()
    optimizer.zero_grad(set_to_none=False)
    return norm


def global_batch(sampler, microbatch, count):
    """`count` microbatches of the trainer's stream, in order, as one [count * microbatch, T] batch
    (the schedule splits it back into the same microbatches)."""
    inputs, targets = [], []
    for _ in range(count):
        i, t = sampler.next(microbatch)
        inputs += i
        targets += t
    return torch.tensor(inputs, dtype=torch.int64), torch.tensor(targets, dtype=torch.int64)


def microbatch_shapes(job, rank):
    """A stage's input and output of one microbatch, as meta tensors: given, the stages skip the
    schedule's run-time shape inference (which exchanges pickled objects, and needs NumPy for that;
    PyPI's torch does not depend on NumPy)."""
    shape, b = job["model"], job["microbatch"]
    t, h, v = shape["sequence_length"], shape["hidden_size"], shape["vocab_size"]
    hidden = torch.empty(b, t, h, device="meta")
    given = torch.empty(b, t, dtype=torch.int64, device="meta") if rank == 0 else hidden
    out = torch.empty(b, t, v, device="meta") if rank == shape["num_stages"] - 1 else hidden
    return given, out


def evaluate(stage, rank, world, sampler, job):
    """Mean loss over the fixed validation microbatches, passed down the stages point to point."""
    shape = job["model"]
    b, t = job["microbatch"], shape["sequence_length"]
    total = 0.0
    with torch.no_grad():
        for i in range(job["eval_batches"]):
            if rank == 0:
                x = torch.tensor(sampler.validation_batch(b, i)[0], dtype=torch.int64)
            else:
                x = torch.empty(b, t, shape["hidden_size"])
                dist.recv(x, src=rank - 1)
            out = stage(x)
            if rank < world - 1:
                dist.send(out.contiguous(), dst=rank + 1)
            else:
                total += lm_loss(out, torch.tensor(sampler.validation_batch(b, i)[1], dtype=torch.int64)).item()
    return total / job["eval_batches"] if job["eval_batches"] else None


def main():
    args = parse_args()
    with open(args.plan) as f:
        plan = json.load(f)
    job, steps = plan["job"], plan["steps"]
    torch.set_num_threads(plan["threads"])
    torch.set_num_interop_threads(1)
    world = job["model"]["num_stages"]
    rank = args.rank
    first, last = rank == 0, rank == world - 1
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=300))

    shape = ModelShape(**job["model"])
    stage = Stage(shape, rank)
    stage.load_exported(SafetensorsFile(plan["initial"]))
    per_step = job["global_batch"] // job["microbatch"]
    pipe = PipelineStage(stage, rank, world, torch.device("cpu"), *microbatch_shapes(job, rank))
    schedule = SCHEDULES[args.schedule](pipe, n_microbatches=per_step, loss_fn=lm_loss, scale_grads=True)
    optimizer = optimizer_of(stage, job)
    sampler = None
    if first or last:  # the first stage feeds the tokens, the last scores the targets
        d = job["dataset"]
        data = Dataset(d["path"], d["validation_fraction"], d["format"], d["text_field"], job["tokenizer"],
                       shape.vocab_size)
        sampler = BatchSampler(data, shape.sequence_length, job["seed"])

    step_losses, norms = [], []
    dist.barrier()
    started = time.perf_counter()
    for step in range(steps):
        x, y = global_batch(sampler, job["microbatch"], per_step) if sampler else (None, None)
        losses = []
        if first:
            schedule.step(x, return_outputs=False)
        elif last:
            schedule.step(target=y, losses=losses, return_outputs=False)
        else:
            schedule.step(return_outputs=False)
        norms.append(clip_and_step(stage, optimizer, lr_at(job, step), job["optimizer"]["grad_clip"]))
        if last:
            step_losses.append(sum(float(l) for l in losses) / len(losses))
    dist.barrier()
    seconds = time.perf_counter() - started

    eval_loss = evaluate(stage, rank, world, sampler, job)
    if last:
        samples = steps * job["global_batch"]
        result = {
            "kind": args.schedule,
            "steps": steps,
            "samples": samples,
            "train_seconds": seconds,
            "samples_per_second": samples / seconds,
            "step_samples_per_second": samples / seconds,
            "loss_first": step_losses[0],
            "loss_last": step_losses[-1],
            "eval_loss": eval_loss,
            "step_losses": step_losses,
            "last_stage_grad_norms": norms,
            "threads": plan["threads"],
            "torch": torch.__version__,
        }
        with open(args.result, "w") as f:
            json.dump(result, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
