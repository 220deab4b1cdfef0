#!/usr/bin/env bash
# Figures, never assertions: the peak RSS of each worker importing its stage of a Hugging Face
# checkpoint (spec.model.init) against the whole model's size, and against one process importing
# every stage (swarm export --initial). The checkpoint is a random Llama of about 0.6 GB in float32
# built by transformers in a temporary folder (tests/checkpoint/hf_tiny_llama.py; nothing is
# downloaded, nothing is kept), sharded at 200 MB.
#
#   bench/hf-import-rss.sh [LAYERS]      (default 12; after scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
LAYERS=${1:-12}
PY=$(bash scripts/install-python.sh)
work=$(mktemp -d /tmp/swarm-hf-rss.XXXXXX)
trap 'rm -rf "$work"' EXIT
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
"$PY" tests/checkpoint/hf_tiny_llama.py make "$work/model" --vocab 32000 --hidden 1024 --intermediate 2816 \
  --layers "$LAYERS" --heads 16 --kv-heads 4 --head-dim 64 --max-shard-size 200MB | cut -c1-120
model_bytes=$(cat "$work"/model/*.safetensors | wc -c)
build/bin/swarm job from-hf "$work/model" --stages 3 --sequence-length 32 > "$work/job.yaml"
# One short step: the figure is the import, not the training.
sed -i 's/^  training:$/  training:\n    globalBatch: 2\n    microbatch: 1\n    evalBatches: 0/' "$work/job.yaml"
grep layersPerStage "$work/job.yaml"
build/bin/swarm local "$work/job.yaml" --steps 1 --log-dir "$work/logs" --no-progress --no-checkpoints \
  > "$work/run.log" 2>&1 || { tail -20 "$work/run.log"; exit 1; }
echo "model: $(( model_bytes / 1000000 )) MB of safetensors (float32)"
for s in 0 1 2; do
  line=$(grep -h "serving stage $s " "$work/logs/stage$s-w0.log" | head -1)
  echo "stage $s worker, peak RSS when serving (import done): ${line##*peak RSS }"
  echo "stage $s worker, peak RSS at exit (one step trained): $(( $(python3 -c "import json;print(json.load(open('$work/logs/stage$s-w0.worker.json'))['peak_rss_bytes'])") / 1000000 )) MB"
done
/usr/bin/time -f "every stage in one process (swarm export --initial): peak RSS %M KB" \
  build/bin/swarm export --job "$work/job.yaml" --initial --out "$work/all.safetensors" >/dev/null
