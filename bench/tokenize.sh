#!/usr/bin/env bash
# Tokenization throughput of `swarm tokenize`: MB of text per second into a token file, with the
# byte tokenizer and with a SentencePiece model (trained here with Debian's spm_train on the bundled
# fortunes, vocabulary 8000), over a corpus of the fortunes repeated to SIZE_MB (default 64).
#   bench/tokenize.sh [SIZE_MB]
set -euo pipefail
cd "$(dirname "$0")/.."
size_mb=${1:-64}
swarm=build/bin/swarm
[ -x "$swarm" ] || { echo "build first: scripts/build.sh" >&2; exit 1; }
work=$(mktemp -d /tmp/swarm-tokenize-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
src=$(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | sort)
cat $src > "$work/one.txt"
while [ "$(stat -c %s "$work/corpus.txt" 2>/dev/null || echo 0)" -lt $((size_mb << 20)) ]; do
  cat "$work/one.txt" >> "$work/corpus.txt"
done
spm_train --input="$work/one.txt" --model_prefix="$work/sp" --vocab_size=8000 --byte_fallback=true \
  --character_coverage=1.0 --minloglevel=2 >"$work/spm_train.log" 2>&1
bytes=$(stat -c %s "$work/corpus.txt")
printf '%-14s %10s %10s %12s\n' tokenizer "text MB" seconds "MB/s"
for kind in bytes sentencepiece; do
  args=(--tokenizer "$kind")
  [ "$kind" = sentencepiece ] && args+=(--model "$work/sp.model")
  start=$(date +%s.%N)
  "$swarm" tokenize "${args[@]}" "$work/corpus.txt" --out "$work/$kind.tok" >/dev/null 2>&1
  end=$(date +%s.%N)
  python3 -c "b=$bytes/1e6; s=$end-$start; print(f'{\"$kind\":<14} {b:10.1f} {s:10.2f} {b/s:12.1f}')"
done
