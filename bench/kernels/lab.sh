#!/bin/bash
# Builds a kernel lab (bench/kernels/NAME.cu; no GPU needed), then runs it
# when a GPU is present. BUILD selects the output folder, REBUILD=1 forces
# the build.
#   bash bench/kernels/lab.sh NAME [lab args...]
set -e
cd "$(dirname "$0")/../.."
NAME=$1
shift
B=${BUILD:-build-cuda}
mkdir -p "$B"
if [ ! -x "$B/$NAME" ] || [ -n "$REBUILD" ]; then
    cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -c -o "$B/${NAME}_quant.o" src/gguf/quant.c
    nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xcompiler -Wall,-Wextra \
        -o "$B/$NAME" "bench/kernels/$NAME.cu" "$B/${NAME}_quant.o" -lm
fi
if nvidia-smi -L > /dev/null 2>&1; then "$B/$NAME" "$@"; else echo "$NAME: built $B/$NAME (no GPU here)"; fi
