#!/bin/sh
# audit-vllm compiled on the GPU box, for every pinned vLLM release (labkit/upstream/releases.py).
#
# The box has no network: fetch the releases' few files here first (`python -m labkit upstream fetch`
# writes build/vllm-trees/, about 1 MB) and carry that folder. On the box, from the repository root:
#
#     OUT=/some/folder sh labkit/upstream/gpu_audit.sh
#
# writes $OUT/gpu_benchmarks.json (provenance + the upstream_audit section) and prints each
# release's report in words. Back here: python -m labkit upstream record --merge-gpu FILE
# takes the section into labkit/data/gpu/h200.json; then re-execute notebook 06.
set -eu
: "${OUT:?set OUT to the folder for the record}"
PY=${PYTHON:-python3}
export LABKIT_VLLM_TREES="${LABKIT_VLLM_TREES:-build/vllm-trees}"
"$PY" -m labkit gpu --out "$OUT" --sections upstream_audit
for tree in "$LABKIT_VLLM_TREES"/*/; do
    echo "== $tree"
    "$PY" -m labkit audit-vllm --vllm "$tree" --backend triton
done
"$PY" -c "import json, sys; from labkit.upstream.record import verdict_table; \
print(verdict_table(json.load(open(sys.argv[1]))['upstream_audit']))" "$OUT/gpu_benchmarks.json"
