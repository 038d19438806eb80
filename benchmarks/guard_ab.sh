#!/usr/bin/env bash
# The library restructuring's guard on a GPU: this tree's GDN kernels and training step
# against an earlier commit's, in one call. Forward + backward of both rules at the benchmark
# shapes (bf16, fp32, TF32; fla's peers beside them in bf16), then one training step of
# hymo_750m (the fast path, B4 T4096) by each tree, then the kernel test files on the GPU.
#     bash benchmarks/guard_ab.sh BEFORE_COMMIT OUT_DIR
# (fla-core as a wheel on PYTHONPATH for the peers; its first call per shape autotunes.)
set -u
before=${1:?the earlier commit}
out=${2:?an output folder}
old=.gpu/old
if [ ! -d "$old/hymo_old" ]; then  # the earlier package, renamed so that both import
  mkdir -p "$old" && git archive "$before" hymo_mini | tar x -C "$old"
  mv "$old/hymo_mini" "$old/hymo_old"
  grep -rl hymo_mini "$old/hymo_old" | xargs sed -i 's/\bhymo_mini\b/hymo_old/g'
fi
if [ ! -d .gpu/oldtree ]; then  # the earlier tree whole, for its own training step
  mkdir -p .gpu/oldtree && git archive "$before" hymo_mini benchmarks | tar x -C .gpu/oldtree
fi
after=$(git rev-parse --short HEAD)
python3 benchmarks/tree_ab.py "$out/tree_ab_guard.json" --old "$old" --before "$before" \
  --after "$after" --rates model --peers
(cd .gpu/oldtree && python3 benchmarks/train_step.py --cases hybrid_fast_b4t4096 \
  --out "$out/train_step_before.json")
python3 benchmarks/train_step.py --cases hybrid_fast_b4t4096 --out "$out/train_step_after.json"
python3 -m pytest -o addopts= -p no:cacheprovider -n 8 -q tests/test_gated_delta_chunk_triton.py \
  tests/test_ops_gla_chunk_triton.py
