# usage.sh: command-line usage: --help, --version, GNU option forms, and every usage error
# (exit status 2, its message, the --help hint). Run as `sh usage.sh FUSEC SRCDIR`.
. "$2/lib.sh"

# The harness itself can fail: a wrong expected status is counted.
before=$FAILS
expect 0 --no-such-option 2>/dev/null
[ "$FAILS" -eq $((before + 1)) ] || { echo "FAIL: expect did not detect a wrong status" >&2; exit 1; }
FAILS=$before

# --help: every option, the exit statuses and the environment variables.
if expect 0 --help; then
    for w in -o --emit --block -D --arch --no-fuse --precision --strict-rounding --train \
             --mem-budget --entry --device --input --random --out-dir --check --repeat --json \
             --version 'Exit status' FUSEC_NUM_THREADS FUSEC_CPU FUSEC_CACHE_DIR CUDA_HOME \
             FUSEC_CPU_GBPS FUSEC_CPU_GFLOPS roofline .svg \
             ' 0 ' ' 1 ' ' 2 ' ' 3 ' ' 4 ' ' 70 '; do
        out_has "$w"
    done
    [ -s "$T/stderr" ] && fail "--help wrote to stderr"
fi
expect 0 -h && out_has "Usage: fusec"
expect 0 run --help && out_has "Usage: fusec"

# --version: `fusec X.Y.Z`, one line.
if expect 0 --version; then
    grep -qE '^fusec [0-9]+\.[0-9]+\.[0-9]+$' "$T/stdout" || fail "--version printed: $(cat "$T/stdout")"
    [ "$(wc -l <"$T/stdout")" -eq 1 ] || fail "--version printed more than one line"
fi

# Usage errors. None of these reads FILE, so a missing file does not matter.
MSG="no input file";                  expect_usage
MSG="no input file";                  expect_usage run
MSG="no input file";                  expect_usage --emit ir
MSG="unrecognized option '--bogus'";  expect_usage small.tf --bogus
MSG="unrecognized option '--bogus'";  expect_usage small.tf --bogus=3
MSG="unrecognized option '-x'";       expect_usage small.tf -x
MSG="unrecognized option '--emi'";    expect_usage small.tf --emi ir
MSG="requires an argument";           expect_usage small.tf -o
MSG="requires an argument";           expect_usage small.tf --emit
MSG="requires an argument";           expect_usage small.tf -D
MSG="doesn't allow an argument";      expect_usage small.tf --no-fuse=1
MSG="doesn't allow an argument";      expect_usage small.tf --help=1
MSG="more than one input file";       expect_usage small.tf bad.tf
MSG="more than one input file";       expect_usage small.tf run
MSG="empty input file name";          expect_usage ''
MSG="needs a non-empty file name";    expect_usage small.tf -o ''
MSG="expected NAME=VALUE";            expect_usage small.tf -D N
MSG="expected NAME=VALUE";            expect_usage small.tf -DN
MSG="positive decimal integer";       expect_usage small.tf -D N=0
MSG="positive decimal integer";       expect_usage small.tf -DN=abc
MSG="positive decimal integer";       expect_usage small.tf -D N=-3
MSG="positive decimal integer";       expect_usage small.tf -D N=+3
MSG="positive decimal integer";       expect_usage small.tf -D N=
MSG="positive decimal integer";       expect_usage small.tf -D 'N= 3'
MSG="positive decimal integer";       expect_usage small.tf -D N=3.5
MSG="positive decimal integer";       expect_usage small.tf -D N=9223372036854775808
MSG="positive decimal integer";       expect_usage small.tf -D N=99999999999999999999999999
MSG="is not an identifier";           expect_usage small.tf -D 1N=3
MSG="is not an identifier";           expect_usage small.tf -D =3
MSG="is not an identifier";           expect_usage small.tf -D 'a b=3'
MSG="invalid --emit value 'foo'";     expect_usage small.tf --emit foo
MSG="dot, report or roofline)";       expect_usage small.tf --emit Roofline
MSG="invalid --emit value ''";        expect_usage small.tf --emit=
MSG="invalid --arch value 'sm_70'";   expect_usage small.tf --arch sm_70
MSG="invalid --arch value 'SM_90'";   expect_usage small.tf --arch=SM_90
MSG="invalid --precision value 'f32'"; expect_usage small.tf --precision f32
MSG="invalid --device value 'tpu'";   expect_usage run small.tf --device tpu
MSG="invalid --device value ''";      expect_usage run small.tf --device=
MSG="not a valid C identifier";       expect_usage small.tf --entry 1abc
MSG="not a valid C identifier";       expect_usage small.tf --entry a-b
MSG="not a valid C identifier";       expect_usage small.tf --entry ''
MSG="not an identifier";              expect_usage small.tf --block ''
MSG="not an identifier";              expect_usage small.tf --block 'x;y'
MSG="invalid --mem-budget value";     expect_usage small.tf --train --mem-budget 12X
MSG="invalid --mem-budget value";     expect_usage small.tf --train --mem-budget -1
MSG="invalid --mem-budget value";     expect_usage small.tf --train --mem-budget 99999999999999999999
MSG="invalid --mem-budget value";     expect_usage small.tf --train --mem-budget 9000000000T
MSG="invalid --repeat value";         expect_usage bench small.tf --repeat 0
MSG="invalid --repeat value";         expect_usage bench small.tf --repeat abc
MSG="invalid --repeat value";         expect_usage bench small.tf --repeat -5
MSG="invalid --repeat value";         expect_usage bench small.tf --repeat 1000001
MSG="invalid --repeat value";         expect_usage bench small.tf --repeat 99999999999999999999999
MSG="invalid --random seed";          expect_usage run small.tf --random -1
MSG="invalid --random seed";          expect_usage run small.tf --random 18446744073709551616
MSG="invalid --random seed";          expect_usage run small.tf --random 0x10
MSG="invalid --random seed";          expect_usage run small.tf --random ''
MSG="expected NAME=PATH.npy";         expect_usage run small.tf --input x
MSG="expected NAME=PATH.npy";         expect_usage run small.tf --input =x.npy
MSG="expected NAME=PATH.npy";         expect_usage run small.tf --input x=
MSG="given twice";                    expect_usage run small.tf --input x=a.npy --input x=b.npy
MSG="needs a non-empty directory";    expect_usage run small.tf --out-dir ''
# Options in the wrong command.
MSG="is not valid with 'fusec FILE'"; expect_usage small.tf --check
MSG="is not valid with 'fusec FILE'"; expect_usage small.tf --device cpu
MSG="is not valid with 'fusec FILE'"; expect_usage small.tf --repeat 3
MSG="is not valid with 'fusec run'";  expect_usage run small.tf --emit ir
MSG="is not valid with 'fusec run'";  expect_usage run small.tf -o x
MSG="is not valid with 'fusec run'";  expect_usage run small.tf --json
MSG="is not valid with 'fusec bench'"; expect_usage bench small.tf --check
MSG="is not valid with 'fusec bench'"; expect_usage bench small.tf --no-fuse
MSG="is not valid with 'fusec bench'"; expect_usage bench small.tf --input x=a.npy
# A huge argument is reported, not a crash.
big=$(printf '%02000d' 7 | tr 0 9)
MSG="positive decimal integer";       expect_usage small.tf -D "N=$big"
MSG="unrecognized option";            expect_usage small.tf "--$big"

# Nothing was written by any of the above.
[ -e small.cu ] && fail "a usage error wrote small.cu"
no_temps "$W"
finish
