# mem.sh: `fusec mem` (docs/training.md, "Memory of a model"): the exact numbers of the GPT-3
# 175B and LLaMA-7B layers in examples/, the ZeRO stages, the optimizers, the text table,
# the JSON object and the usage errors. Run as `sh mem.sh FUSEC SRCDIR`.
. "$2/lib.sh"
EX=$(cd "$SRC/../../examples" && pwd) || exit 1
GPT3=$EX/gpt3_layer.tf
LLAMA=$EX/llama7b_layer.tf

# jget KEY: the integer of a top-level "KEY": N in the last JSON output (one line).
jget() { sed -n "s/.*\"$1\": \(-\{0,1\}[0-9][0-9]*\).*/\1/p" "$T/stdout"; }
# is WHAT GOT WANT
is() { [ "$2" = "$3" ] || fail "$1: got '$2', expected '$3'"; }

# ---- (1) --remat none saves what Megatron's eager layer saves (Korthikanti et al. 2022,
# "Reducing Activation Recomputation in Large Transformer Models"): s*b*h*(34 + 5*a*s/h) bytes,
# plus the two layernorms' mean and rstd (f32, s*b values each): 16*s*b bytes.
korthikanti() {  # S B H A -> bytes
    echo $(( $1 * $2 * $3 * 34 + 5 * $4 * $1 * $1 * $2 + 16 * $1 * $2 ))
}
if expect 0 mem "$GPT3" --remat none --json; then
    is "GPT-3 none: saved bytes" "$(jget saved_activation_bytes)" "$(korthikanti 2048 1 12288 96)"
    is "GPT-3 none: saved bytes (literal)" "$(jget saved_activation_bytes)" 2868936704
    is "GPT-3 none: saved activations" "$(jget saved_activation_values)" 19
    is "GPT-3 params" "$(jget params)" $(( 12 * 12288 * 12288 + 13 * 12288 ))
    is "GPT-3 param bytes" "$(jget param_bytes)" $(( 2 * 1812099072 ))
fi
# the same rule at other dims, odd ones and a batch of 3 included
for dims in "64 2 256 4" "96 3 192 6" "32 1 64 1"; do
    set -- $dims
    if expect 0 mem "$GPT3" --remat none --json -D S=$1 -D B=$2 -D H=$3 -D A=$4; then
        is "GPT-3 none at S=$1 B=$2 H=$3 A=$4" "$(jget saved_activation_bytes)" "$(korthikanti "$@")"
    fi
done

# ---- (2) auto under a budget of 34*s*b*h: the attention's s^2 tensors recomputed, not saved;
# the recomputation a few percent of the flops at most (Korthikanti et al.: 2.7%).
if expect 0 mem "$GPT3" --mem-budget 855638016 --json; then
    is "GPT-3 budget" "$(jget mem_budget)" $(( 34 * 2048 * 12288 ))
    saved=$(jget saved_activation_bytes); rf=$(jget recompute_flops)
    ff=$(jget forward_flops); bf=$(jget backward_flops)
    [ "$saved" -le 855638016 ] || fail "GPT-3 auto: saved $saved > the budget 855638016"
    [ $(( rf * 1000 / (ff + bf) )) -lt 30 ] || fail "GPT-3 auto: recompute $rf flops is 3% or more of $ff + $bf"
    is "GPT-3 auto 34sbh: saved" "$saved" 504922112
    is "GPT-3 auto 34sbh: recompute flops" "$rf" 106308829184
fi
expect 1 mem "$GPT3" --mem-budget 1000 && err_has "is below what block 'gpt3_layer' must save"

# ---- (3) ZeRO: mixed-precision AdamW (bf16 params) keeps 2 + 2 + 12 bytes per parameter;
# per device 16P, 4P + 12P/N, 2P + 14P/N, 16P/N for stages 0..3.
zero_want() {  # P N STAGE
    case $3 in
    0) echo $(( 16 * $1 )) ;;
    1) echo $(( 4 * $1 + 12 * $1 / $2 )) ;;
    2) echo $(( 2 * $1 + 14 * $1 / $2 )) ;;
    3) echo $(( 16 * $1 / $2 )) ;;
    esac
}
for case in "$LLAMA 1 202383360" "$GPT3 1 1812099072" "$GPT3 96 1812099072"; do
    set -- $case
    file=$1 L=$2 P=$(( $2 * $3 ))
    for N in 8 64; do
        for z in 0 1 2 3; do
            if expect 0 mem "$file" --layers "$L" --zero $z --devices $N --json; then
                is "$(basename "$file") L=$L ZeRO $z N=$N" "$(jget model_state_bytes_per_device)" "$(zero_want $P $N $z)"
            fi
        done
    done
done
# shards round up per device: LLaMA-7B over 7 devices
P=202383360
if expect 0 mem "$LLAMA" --zero 3 --devices 7 --json; then
    is "ZeRO 3 over 7: params" "$(jget param_bytes_per_device)" $(( (2 * P + 6) / 7 ))
    is "ZeRO 3 over 7: states" "$(jget model_state_bytes_per_device)" \
        $(( 2 * ((2 * P + 6) / 7) + (12 * P + 6) / 7 ))
fi
# the optimizers: sgd keeps an f32 master copy of 16-bit params only; none nothing
if expect 0 mem "$LLAMA" --optimizer sgd --json; then is "sgd bf16" "$(jget optimizer_bytes)" $(( 4 * P )); fi
if expect 0 mem "$LLAMA" --optimizer none --json; then is "none bf16" "$(jget optimizer_bytes)" 0; fi
# f32 params (small.tf: g and b, 7 each): AdamW 4 + 4 + 8, SGD 4 + 4
if expect 0 mem small.tf --json; then
    is "f32 params" "$(jget params)" 14
    is "f32 adamw" "$(jget model_state_bytes)" $(( 16 * 14 ))
    is "f32 adamw optimizer" "$(jget optimizer_bytes)" $(( 8 * 14 ))
fi
if expect 0 mem small.tf --optimizer sgd --json; then is "f32 sgd" "$(jget optimizer_bytes)" 0; fi

# ---- (4) LLaMA-7B: 4*4096^2 + 3*4096*11008 + 2*4096 parameters
if expect 0 mem "$LLAMA" --json; then
    is "LLaMA-7B params" "$(jget params)" 202383360
    is "LLaMA-7B params (formula)" "$(jget params)" $(( 4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096 ))
fi

# ---- the model's sums (docs/training.md)
if expect 0 mem "$GPT3" --layers 96 --zero 1 --devices 8 --json; then
    L=96
    is "states" "$(jget model_state_bytes_per_device)" \
        $(( $(jget param_bytes_per_device) + $(jget grad_bytes_per_device) + $(jget optimizer_bytes_per_device) ))
    is "activations" "$(jget activation_bytes_per_device)" $(( L * $(jget saved_activation_bytes) ))
    is "transient" "$(jget backward_transient_bytes)" \
        $(( $(jget backward_workspace_bytes) + $(jget output_grad_bytes) + $(jget input_grad_bytes) ))
    is "peak" "$(jget peak_bytes_per_device)" \
        $(( $(jget model_state_bytes_per_device) + $(jget activation_bytes_per_device) + $(jget backward_transient_bytes) ))
    is "forward peak" "$(jget forward_peak_bytes)" \
        $(( $(jget forward_input_bytes) + $(jget forward_output_bytes) + $(jget forward_workspace_bytes) ))
    is "forward inputs" "$(jget forward_input_bytes)" $(( 2 * 1812099072 + 2 * 2048 * 12288 ))
    # the Pareto front: bytes ascending, flops descending
    sed 's/.*"pareto": \[//' "$T/stdout" | tr '}' '\n' |
        sed -n 's/.*"bytes": \([0-9]*\), "flops": \([0-9]*\).*/\1 \2/p' >"$T/front"
    [ "$(wc -l <"$T/front")" -ge 2 ] || fail "the Pareto front has fewer than 2 points"
    awk 'NR > 1 && !($1 > b && $2 < f) { bad = 1 } { b = $1; f = $2 } END { exit bad }' "$T/front" ||
        fail "the Pareto front is not sorted by bytes with falling flops: $(cat "$T/front")"
    if [ "$HAVE_PYTHON" = 1 ]; then
        python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["layers"] == 96 and d["zero"] == 1' \
            "$T/stdout" || fail "mem --json is not one JSON object"
    fi
fi
# stage 2 and 3 add one layer's full gradients (and params) to the transient
if expect 0 mem "$GPT3" --zero 3 --devices 8 --json; then
    is "transient ZeRO 3" "$(jget backward_transient_bytes)" \
        $(( $(jget backward_workspace_bytes) + $(jget output_grad_bytes) + $(jget input_grad_bytes) + 2 * 2 * 1812099072 ))
fi

# ---- the text table
if expect 0 mem "$LLAMA" --layers 32 --zero 2 --devices 8 --remat none; then
    for w in "block llama7b_layer: 32 layers; optimizer adamw; ZeRO stage 2 over 8 devices" \
             "params (202383360 elements)" gradients "optimizer state" "model states" \
             "saved activations (" "backward transient" peak "forward peak (inference)" \
             "of forward + backward" "saved for the backward" "rmsnorm at " "Pareto front" \
             "recompute flops"; do
        out_has "$w"
    done
fi
# standard input, compiled twice (training and inference)
if "$FUSEC" mem - --json <"$LLAMA" >"$T/stdout" 2>"$T/stderr"; then
    is "stdin params" "$(jget params)" 202383360
else
    fail "fusec mem - failed"; show_stderr
fi
# --train is implied, and accepted
expect 0 mem small.tf --train

# ---- the weight gradient under [S, B, H] activations, which the GPT-3 layer's plan relies on
# (autodiff.c: one product over the flattened batch), against NumPy
if [ "$HAVE_NUMPY" = 1 ]; then
    printf '%s\n' 'block wg(x: f32[3, 2, 4], param w: f32[4, 5], param u: f32[1, 4, 5]) -> f32[3, 2, 5]' \
        '{' '    return x @ w + x @ u' '}' >wg.tf
    python3 -c 'import numpy as np
r = np.random.default_rng(1)
np.save("x.npy", r.standard_normal((3, 2, 4)).astype(np.float32))
np.save("g.npy", r.standard_normal((3, 2, 5)).astype(np.float32))'
    if expect 0 run wg.tf --train --input x=x.npy --grad-output out0=g.npy --out-dir wg; then
        python3 -c 'import numpy as np
x, g = np.load("x.npy").astype(np.float64), np.load("g.npy").astype(np.float64)
want = np.einsum("sbk,sbn->kn", x, g)
for name, got in (("w", np.load("wg/grad_w.npy")), ("u", np.load("wg/grad_u.npy")[0])):
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err < 1e-5, (name, err)' || fail "the weight gradients of x @ w differ from NumPy's"
    fi
fi

# ---- usage errors
MSG="invalid --layers value '0'";        expect_usage mem small.tf --layers 0
MSG="invalid --layers value '-1'";       expect_usage mem small.tf --layers -1
MSG="invalid --layers value";            expect_usage mem small.tf --layers 99999999999999999999
MSG="invalid --layers value";            expect_usage mem small.tf --layers 1e3
MSG="invalid --devices value '0'";       expect_usage mem small.tf --devices 0
MSG="invalid --devices value";           expect_usage mem small.tf --devices=
MSG="invalid --zero value '4'";          expect_usage mem small.tf --zero 4
MSG="invalid --zero value '01'";         expect_usage mem small.tf --zero 01
MSG="invalid --optimizer value 'adam'";  expect_usage mem small.tf --optimizer adam
MSG="invalid --remat value";             expect_usage mem small.tf --remat some
MSG="invalid --mem-budget value";        expect_usage mem small.tf --mem-budget 1X
MSG="requires an argument";              expect_usage mem small.tf --layers
MSG="overflows a 64-bit byte count";     expect_usage mem "$GPT3" --layers 9223372036854775807
MSG="overflows a 64-bit byte count";     expect_usage mem "$GPT3" --layers 1000000000
MSG="only with 'fusec mem'";             expect_usage small.tf --layers 2
MSG="only with 'fusec mem'";             expect_usage run small.tf --zero 1
MSG="only with 'fusec mem'";             expect_usage bench small.tf --devices 2
MSG="only with 'fusec mem'";             expect_usage small.tf --optimizer sgd
MSG="not valid with 'fusec mem'";        expect_usage mem small.tf --device cpu
MSG="not valid with 'fusec mem'";        expect_usage mem small.tf --no-fuse
MSG="not valid with 'fusec mem'";        expect_usage mem small.tf --check
MSG="not valid with 'fusec mem'";        expect_usage mem small.tf -o x
MSG="no input file";                     expect_usage mem
# ---- --precision f8 (docs/precision.md, "f8"): the GPT-3 layer (written in bf16) saves its
# E4M3 values at 1 byte an element, half of what bf16 saves for them; q and k (which make the
# attention scores) and the input stay bf16. 696 MiB against 1248 MiB; the peak falls too.
if expect 0 mem "$GPT3" --precision bf16 --json; then
    is "GPT-3 bf16: saved bytes" "$(jget saved_activation_bytes)" 1308622848
    bpeak=$(jget peak_bytes_per_device)
fi
if expect 0 mem "$GPT3" --precision f8 --json; then
    is "GPT-3 f8: saved bytes" "$(jget saved_activation_bytes)" 729808896
    [ "$(jget peak_bytes_per_device)" -lt "${bpeak:-0}" ] || fail "GPT-3 f8: the peak is not below bf16's"
fi
if expect 0 mem "$GPT3" --precision f8; then
    out_has "saved12      f8e4m3[1,96,2048,2048]            402653184  384.00 MiB  softmax at 35:9"
    out_has "saved9       bf16[2048,1,12288]                 50331648  48.00 MiB   split at 30:15"
fi
# the `attention` op at f8 (the LLaMA-7B layer): its steps as at bf16, the probabilities saved in
# E4M3 (f32 while the op stayed whole at f8: 611 MiB saved, over bf16's 438)
if expect 0 mem "$LLAMA" --precision f8 --json; then
    is "LLaMA-7B f8: saved bytes" "$(jget saved_activation_bytes)" 238026752
fi
if expect 0 mem "$LLAMA" --precision f8; then
    out_has "saved13      f8e4m3[1,32,2048,2048]            134217728  128.00 MiB  softmax at 44:9"
fi
if expect 0 --help; then
    for w in "fusec mem FILE.tf" --layers --optimizer --zero --devices; do out_has "$w"; done
fi
finish
