# compile.sh: the compile command: output to stdout, the default output path next to the input,
# GNU option forms, source errors (exit 1 with file:line:col), and that no partial or stale
# output is ever left. Run as `sh compile.sh FUSEC SRCDIR`.
. "$2/lib.sh"

# -o - writes to stdout; the two spellings of each option give the same result.
if expect 0 small.tf --emit ir -D N=3 -o -; then
    [ -s "$T/stdout" ] || fail "--emit ir -o - wrote nothing to stdout"
    cp "$T/stdout" "$T/ir1"
fi
expect 0 small.tf --emit=ir -DN=3 -o- && { cmp -s "$T/stdout" "$T/ir1" || fail "--emit=ir -DN=3 -o- differs from --emit ir -D N=3 -o -"; }
expect 0 --emit ir --output=- -D N=3 -- small.tf && { cmp -s "$T/stdout" "$T/ir1" || fail "-- small.tf differs"; }
expect 0 - --emit ir -D N=3 <small.tf && { [ -s "$T/stdout" ] || fail "FILE '-' wrote nothing to stdout"; }
# -D changes the result; a later -D overrides an earlier one.
expect 0 small.tf --emit ir -D N=4 -o - && { cmp -s "$T/stdout" "$T/ir1" && fail "-D N=4 gives the same IR as -D N=3"; }
expect 0 small.tf --emit ir -D N=4 -D N=3 -o - && { cmp -s "$T/stdout" "$T/ir1" || fail "a later -D does not override an earlier one"; }
# --block picks a block; the default is the last one.
expect 0 small.tf --emit ir -o - && cp "$T/stdout" "$T/ir_last"
expect 0 small.tf --emit ir --block small -o - && { cmp -s "$T/stdout" "$T/ir_last" || fail "default block is not the last"; }
expect 0 small.tf --emit ir --block scale -o - && { cmp -s "$T/stdout" "$T/ir_last" && fail "--block scale gives the last block"; }
expect 1 small.tf --emit ir --block nosuch -o - && err_has "nosuch"
# A -D naming an undeclared dim is an error that names it (usage or input error).
"$FUSEC" small.tf -D ZZ=3 -o - >"$T/stdout" 2>"$T/stderr"
rc=$?
{ [ $rc -eq 1 ] || [ $rc -eq 2 ]; } || fail "-D ZZ=3: exit status $rc, expected 1 or 2"
err_has "ZZ"
err_has "fusec: error: "
# A misspelt -D name: the file's dims are listed, and a close one suggested (a name of one
# or two letters only in another case).
expect 1 small.tf -D Nn=3 -D c=4 -o - &&
    { err_has "small.tf: error: -D Nn: no dim named 'Nn' is declared; expected one of: N, C"
      err_has "small.tf: error: -D c: no dim named 'c' is declared; expected one of: N, C; did you mean 'C'?"; }

# Default output path: next to the input, with the extension of the kind.
mkdir sub
cp small.tf sub/model.v1.tf
for kind_ext in cuda:cu ir:ir kir:kir llvm:ll dot:dot report:txt roofline:svg; do
    kind=${kind_ext%%:*}
    ext=${kind_ext#*:}
    if expect 0 sub/model.v1.tf --emit "$kind"; then
        [ -s "sub/model.v1.$ext" ] || fail "--emit $kind did not write sub/model.v1.$ext"
        [ -s "$T/stdout" ] && fail "--emit $kind without -o wrote to stdout"
    fi
done
ls sub >"$T/ls"
[ "$(wc -l <"$T/ls")" -eq 8 ] || fail "unexpected files in sub/: $(cat "$T/ls")"
expect 0 small.tf && { [ -s small.cu ] || fail "the default kind is not cuda (.cu)"; }
# -oOUT and -o OUT; an existing output is replaced.
# ($T/ir_last is small.tf's IR on stdout; the IR names its source file.)
expect 0 small.tf --emit ir -oa.ir && { cmp -s a.ir "$T/ir_last" || fail "-oa.ir differs from -o -"; }
echo stale >b.ir
expect 0 small.tf --emit ir -o b.ir && { cmp -s b.ir "$T/ir_last" || fail "-o b.ir did not replace the old file"; }
# The output must not overwrite the input.
MSG="is the input file"; expect_usage small.tf -o small.tf
cp small.tf same.cu
MSG="is the input file"; expect_usage same.cu
cmp -s same.cu small.tf || fail "the input was overwritten"

# A source error: exit 1, the diagnostic with file:line:col, no output file; the last line
# only says that the compilation failed, however many errors were printed above it.
if expect 1 bad.tf; then
    err_has "bad.tf:6:16: error:"
    [ "$(tail -n 1 "$T/stderr")" = "fusec: error: bad.tf: compilation failed" ] ||
        fail "bad.tf: last line '$(tail -n 1 "$T/stderr")'"
fi
printf 'dim N = 4\nblock b(x: f32[N]) {\n    y = bar(x)\n    return foo(y)\n}\n' >two.tf
if expect 1 two.tf -o -; then
    [ "$(grep -c ': error: ' "$T/stderr")" = 3 ] || fail "two.tf: expected 2 diagnostics and the last line"
    [ "$(tail -n 1 "$T/stderr")" = "fusec: error: two.tf: compilation failed" ] ||
        fail "two.tf: last line '$(tail -n 1 "$T/stderr")'"
fi
[ -e bad.cu ] && fail "a failed compile left bad.cu"
# ... and an existing output file keeps its content; no temporary is left.
printf 'previous content\n' >keep.cu
expect 1 bad.tf -o keep.cu
[ "$(cat keep.cu)" = "previous content" ] || fail "a failed compile modified keep.cu"
expect 1 bad.tf --emit ir -o keep.cu
[ "$(cat keep.cu)" = "previous content" ] || fail "a failed compile modified keep.cu"
no_temps "$W"

# Missing or unreadable input: exit 1.
expect 1 nosuch.tf && err_has "nosuch.tf"
[ -e nosuch.cu ] && fail "a missing input wrote nosuch.cu"
expect 1 sub && err_has "sub"

# Unwritable outputs: exit 1, nothing written, no temporary left.
expect 1 small.tf -o nodir/x.cu && err_has "nodir/x.cu"
[ -e nodir ] && fail "nodir was created"
mkdir outdir
expect 1 small.tf -o outdir && err_has "Is a directory"
mkdir ro
chmod 555 ro
if [ -w ro ]; then
    echo "note: running as a user who can write a read-only folder: skipping that check"
else
    expect 1 small.tf -o ro/x.cu && err_has "ro/x.cu"
    [ -e ro/x.cu ] && fail "wrote into a read-only folder"
fi
chmod 755 ro
no_temps "$W"
# Writing to a device file works in place (not replaced by a rename).
if [ -c /dev/null ] && [ -w /dev/null ]; then
    expect 0 small.tf --emit ir -o /dev/null
    [ -c /dev/null ] || fail "/dev/null is no longer a character device"
fi

# --emit ptx/cubin need NVRTC: success, or exit 3 where it is absent.
for kind in ptx cubin; do
    "$FUSEC" small.tf --emit $kind -o "small.$kind" >"$T/stdout" 2>"$T/stderr"
    rc=$?
    case $rc in
    0) [ -s "small.$kind" ] || fail "--emit $kind wrote nothing" ;;
    3) [ -e "small.$kind" ] && fail "--emit $kind failed but wrote small.$kind"
       err_has "fusec: error: " ;;
    *) fail "--emit $kind: exit status $rc, expected 0 or 3"; show_stderr ;;
    esac
done
# --precision (docs/precision.md): bf16 and f16 store the float inputs, params and activations
# in the type and keep a sum f32; f8 keeps the interface bf16 and stores the intermediates in
# E4M3 with a slot each; the default and `keep` give the declared dtypes.
for p in bf16 f16; do
    if expect 0 small.tf --precision $p --emit ir -o -; then
        out_has "input %0 \"x\": $p[5, 7]"
        out_has "param %1 \"g\": $p[7]"
        out_has "sum(%40) {axes=[1], keepdim=0} : f32[5]"
    fi
done
expect 0 small.tf --precision keep --emit ir -o - && cmp -s "$T/stdout" "$T/ir_last" || fail "--precision keep changes the IR"
if expect 0 small.tf --precision f8 --emit ir -o -; then
    # the interface is f8 too: x with a slot its caller scales, the 1-D params 16-bit
    out_has "fp8 slot 0: f8e4m3 scale=1.0 input=0"
    out_has "fp8 slot 1: f8e4m3 scale=1.0"
    out_has "input %0 \"x\": f8e4m3[5, 7]"
    out_has "param %1 \"g\": bf16[7]"
    out_has "= fp8_quant("
    out_has "= fp8_dequant("
fi
# the AOT unit takes the f8 state (docs/cuda.md)
if expect 0 small.tf --precision f8 -o -; then
    out_has "extern \"C\" int fusec_small_fp8_state_init(float *fp8_state, cudaStream_t stream)"
    out_has "float *fp8_state, void *workspace, size_t workspace_bytes, cudaStream_t stream"
    # and the scales of its f8 inputs and outputs (x in, y out; out1, a sum, is f32)
    out_has "extern \"C\" int fusec_small_fp8_set_input_scale(float *fp8_state, int input, float scale, cudaStream_t stream)"
    out_has "extern \"C\" int fusec_small_fp8_output_scale(const float *fp8_state, int output, float *scale, cudaStream_t stream)"
    out_has "const unsigned char *in0, const unsigned short *in1, const unsigned short *in2, unsigned char *out0, float *out1,"
fi
# and with --train the forward and the backward take it (the backward reads the forward's scales)
if expect 0 small.tf --precision f8 --train -o -; then
    out_has "void *saved, float *fp8_state, void *workspace, size_t workspace_bytes, cudaStream_t stream);"
    out_has "const void *saved,"
fi
# The CPU program of a residual add feeding a layernorm, at bf16 and f8 (docs/passes.md,
# Budgets): the layernorm's weight and bias are staged widened before the loop over the rows
# (stage_whole; two arrays stored before `store i64 %block_begin`), x and y are not staged (one
# pass reads them; the row of their rounded sum serves the others): three stack arrays in all.
# (f16 weights are staged only without F16C: it depends on the host.)
cat >"$T/rln.tf" <<'EOF2'
block rln(x: f32[6, 40], y: f32[6, 40], param g: f32[40], param b: f32[40]) -> f32[6, 40], f32[6, 40] {
    r = x + y
    return r, layernorm(r, g, b, eps=1e-5)
}
EOF2
for p in bf16 f8; do
    if expect 0 "$T/rln.tf" --precision $p --emit llvm -o -; then
        sed -n '/^define internal void @k[0-9]*_layernorm.body/,/^}/p' "$T/stdout" >"$T/rln.ll"
        n=$(grep -c '%sh[0-9]* = alloca' "$T/rln.ll")
        pre=$(sed '/store i64 %block_begin/q' "$T/rln.ll" | grep -c 'float, ptr %sh')
        [ "$n" = 3 ] || fail "rln at $p: $n stack arrays in the row kernel, expected 3"
        [ "$pre" = 2 ] || fail "rln at $p: $pre arrays stored before the block loop, expected 2"
    fi
done
no_temps "$W"
finish
