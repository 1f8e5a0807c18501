#!/bin/bash
# Session 32's third call: (1) a timing ablation of the captured decode step (MEMRA_SKIP_OPS: the named ops are
# not run, so the logits are wrong; the time a step saves is what those ops cost inside it, launches and waits
# included) on 9b and 35b-a3b; (2) the MoE decode pair's opt-in overlap switches (MEMRA_MOE_DN_PRE: k_moe_tc_down
# routes the token and requests its first item's weights before its wait; MEMRA_MOE_GU_TRIG: k_moe_q8_gu lets
# the down kernel launch once its weights landed): gated, logits against the default, decode@0 A/B.
#   BUDGET=330 OUT=$OUT bash bench/next_run_ablate.sh   (carry .bin .fix; .bin/memra this tree, stripped, xz'd)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-330}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
bash bench/unpack.sh .bin .fix
B=.bin/memra
nvidia-smi --query-gpu=name --format=csv,noheader
f=/tmp/m.gguf
dec() { env "$@" $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 --reps 3 2>&1 |
  grep '^decode' | tr -s ' '; }
# (2) first: the MoE switches on 35b-a3b
$B mkmodel --preset 35b-a3b --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
MEMRA_MOE_DN_PRE=1 MEMRA_MOE_GU_TRIG=1 timeout 60 $B gate kernels --model 35b-a3b --seed 331 >$OUT/gk.log 2>&1
echo "MEMRA_MOE_DN_PRE=1 MEMRA_MOE_GU_TRIG=1 gate kernels 35b-a3b rc=$? $(grep -h 'passed' $OUT/gk.log | tail -1)"
grep -h FAIL $OUT/gk.log | head
TOK=$(python3 -c "import random; random.seed(7)
print(','.join(str(random.randrange(1000, 150000)) for _ in range(79)))")
$B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-0.f32 2>/dev/null
for v in MEMRA_MOE_DN_PRE=1 MEMRA_MOE_GU_TRIG=1 "MEMRA_MOE_DN_PRE=1 MEMRA_MOE_GU_TRIG=1"; do
  env $v $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-1.f32 2>/dev/null
  cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "35b-a3b eval 79 --all (last 15 on the decode path): [$v] cmp-equal to the default"
done
for r in 1 2; do
  for v in - MEMRA_MOE_DN_PRE=1 MEMRA_MOE_GU_TRIG=1 "MEMRA_MOE_DN_PRE=1 MEMRA_MOE_GU_TRIG=1"; do
    e=; [ "$v" != - ] && e=$v
    echo "35b-a3b r$r [$v] $(dec $e)"
  done
done
# (1) the ablation, 35b-a3b then 9b
for ops in - moe_block post_norm+ffn_gate_inp+shexp gdn attention qk_norm_rope_store ssm_out "attn_norm+ssm_in (qkv z beta alpha)"; do
  left 40 || break
  e=; [ "$ops" != - ] && e="MEMRA_SKIP_OPS=$ops"
  echo "35b-a3b skip [$ops] $(dec ${e:+"$e"})"
done
rm -f $f /tmp/ev-*.f32
$B mkmodel --preset 9b --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
for ops in - gdn attention qk_norm_rope_store ssm_out attn_output output "ffn down" "post_norm+ffn gate+up swiglu" -; do
  left 25 || break
  e=; [ "$ops" != - ] && e="MEMRA_SKIP_OPS=$ops"
  echo "9b skip [$ops] $(dec ${e:+"$e"})"
done
rm -f $f
gzip -f $OUT/gk.log
echo "t=$(( $(date +%s) - T0 ))"
