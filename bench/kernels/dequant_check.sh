#!/bin/bash
# Host-side check of the CUDA dequantizers against memra_dequant_row (no GPU needed).
set -e
cd "$(dirname "$0")/../.."
B=${BUILD:-build-cuda}
make -s BUILD=$B $B/libmemra.a
nvcc -std=c++17 -O1 -Iinclude -Isrc -o $B/dequant_check bench/kernels/dequant_check.cu $B/libmemra.a \
    -L/usr/local/cuda/lib64 -lcudart_static -ldl -lrt -lpthread -lpcre2-8 -lutf8proc -ljansson -lm
$B/dequant_check
