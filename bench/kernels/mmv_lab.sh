#!/bin/bash
# Tensor-core decode matvec lab (bench/kernels/mmv_lab.cu): build (no GPU needed),
# then run when a GPU is present. BUILD selects the output folder.
#   bash bench/kernels/mmv_lab.sh [in n_out]
set -e
cd "$(dirname "$0")/../.."
B=${BUILD:-build-cuda}
mkdir -p "$B"
if [ ! -x "$B/mmv_lab" ] || [ -n "$REBUILD" ]; then
    cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -c -o "$B/mmv_lab_quant.o" src/gguf/quant.c
    nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xcompiler -Wall,-Wextra \
        -o "$B/mmv_lab" bench/kernels/mmv_lab.cu "$B/mmv_lab_quant.o" -lm
fi
if nvidia-smi -L > /dev/null 2>&1; then "$B/mmv_lab" "$@"; else echo "mmv_lab: built $B/mmv_lab (no GPU here)"; fi
