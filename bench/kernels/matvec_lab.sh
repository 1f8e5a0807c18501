#!/bin/bash
# Decode matvec lab (bench/kernels/matvec_lab.cu): build (no GPU needed),
# then run when a GPU is present. BUILD selects the output folder.
#   bash bench/kernels/matvec_lab.sh [in n_out]
set -e
cd "$(dirname "$0")/../.."
B=${BUILD:-build-cuda}
mkdir -p "$B"
if [ ! -x "$B/matvec_lab" ] || [ -n "$REBUILD" ]; then
    cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -c -o "$B/matvec_lab_quant.o" src/gguf/quant.c
    nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xcompiler -Wall,-Wextra \
        -o "$B/matvec_lab" bench/kernels/matvec_lab.cu "$B/matvec_lab_quant.o" -lm
fi
if nvidia-smi -L > /dev/null 2>&1; then "$B/matvec_lab" "$@"; else echo "matvec_lab: built $B/matvec_lab (no GPU here)"; fi
