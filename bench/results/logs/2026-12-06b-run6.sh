#!/bin/bash
# Session 21 call 6 (calls 7 and 8 of the device tool: the first ran with TIME_BUDGET=150 and benched 9b q4_k_m
# alone, the second found .bin/memra missing): the four files through bench/run_gpu.sh on run 5's binary
# (.bin/memra.xz: the tree of this results file).
python3 -c "
import lzma
open('.bin/memra','wb').write(lzma.open('.bin/memra.xz').read())
"; chmod +x .bin/memra
SKIP_BUILD=1 SKIP_GATE=1 BUILD=.bin TIME_BUDGET=330 VOCAB=tests/data/tiny-dense.bf16.gguf \
  MODELS="9b:q4_k_m 35b-a3b:q4_k_m 9b:q8_0 27b:q4_k_m" \
  BENCH_ARGS="--prefill 512,8192 --depth 0,4096 --decode-tokens 32 --reps 2" bash bench/run_gpu.sh 2>&1 | tail -24
