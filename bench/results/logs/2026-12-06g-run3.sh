#!/bin/bash
# Session 26, runs 3-5 (one command line each, on the warm H200 of run 2; .bin/memra of 03f3695).
# run 3 (9b, 35b-a3b) and run 4 (27b): logits with the output head on the same path in both runs.
B=.bin/memra; [ -x $B ] || bash bench/unpack.sh .bin .fix >/dev/null 2>&1
TOK=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(1000, 150000)) for _ in range(66)))")
for m in 9b 35b-a3b 27b; do
  f=/tmp/$m.gguf
  $B mkmodel --preset $m --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1
  MEMRA_MMVQ6=1 $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/a.f32 2>/dev/null
  MEMRA_TILED=0 MEMRA_MMVQ6=1 $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/b.f32 2>/dev/null
  cmp /tmp/a.f32 /tmp/b.f32 && echo "$m: MEMRA_MMVQ6=1 tile-major == MEMRA_TILED=0 MEMRA_MMVQ6=1 (66 tokens --all)"
  rm -f $f
done
# run 5: the side branch with the shared int8 prep against MEMRA_FORK=0, 9b q4_k_m decode@0, two rounds
f=/tmp/9b.gguf
$B mkmodel --preset 9b --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1
for r in 1 2; do
  for v in - MEMRA_FORK=0; do
    e=; [ $v != - ] && e=$v
    echo "9b r$r [$v] $(env $e $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 --reps 3 2>&1 |
      grep '^decode' | tr -s ' ')"
  done
done
