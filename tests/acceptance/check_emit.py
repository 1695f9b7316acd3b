#!/usr/bin/env python3
"""check_emit.py: every example compiles to every text target.

For each examples/*.tf (or --only NAME):
  - `fusec X.tf --emit ir|kir|llvm -o FILE` succeeds and writes a non-empty file; the LLVM IR
    is also parsed by llvm-as (LLVM 19) where that is installed;
  - `fusec X.tf --emit kir` without -o writes X.kir next to the input (docs/cli.md);
  - `--emit report` (CPU figures measured) has the target rows sm_80, sm_90 and cpu, one row
    per launch with a predicted time and M/C mark per target; `--emit roofline` is
    well-formed XML (xml.etree) with one point per launch, labelled with generated names;
  - with NVRTC present (/usr/local/cuda/lib64/libnvrtc.so* or $CUDA_HOME/lib64):
    `fusec X.tf --emit ptx --arch sm_90 -o -` succeeds and prints PTX for sm_90 with at
    least one .entry; the same for sm_80; each is assembled by ptxas where installed, with no
    register spills (ptxas -v); --emit cubin gives an ELF for sm_80 and sm_90;
    without NVRTC this part is skipped with a message;
  - with nvcc on PATH (or in $CUDA_HOME/bin, /usr/local/cuda/bin): `fusec X.tf -o X.cu` then
    `nvcc -arch=sm_90 -c X.cu -o X.o -Werror all-warnings` succeeds with no warning; so does
    the training unit (`--train`, fused and `--no-fuse`), with `-Xptxas -v` reporting no
    register spills in any kernel and the object defining its five entry points (nm);
    skipped with a message otherwise.
And once, for tests/acceptance/names_marker.tf (all its user names start with "zqmark"):
  the generated CUDA C, PTX and LLVM IR contain "zqmark" only inside comments; the roofline
  chart's point labels carry none.

Exit status: 0 all ran parts passed, 1 a failure, 77 nothing could run (no fusec).
Usage: check_emit.py --fusec build/fusec [--only NAME]... [--keep] [-v]
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
EXAMPLES_DIR = os.path.join(ROOT, "examples")
TIMEOUT_S = 300


def cuda_homes():
    homes = []
    if os.environ.get("CUDA_HOME"):
        homes.append(os.environ["CUDA_HOME"])
    homes.append("/usr/local/cuda")
    return homes


def find_nvrtc():
    for h in cuda_homes():
        for sub in ("lib64", "lib", "targets/x86_64-linux/lib"):
            hits = sorted(glob.glob(os.path.join(h, sub, "libnvrtc.so*")))
            if hits:
                return hits[0]
    return None


def find_tool(name):
    p = shutil.which(name)
    if p:
        return p
    for h in cuda_homes():
        c = os.path.join(h, "bin", name)
        if os.access(c, os.X_OK):
            return c
    return None


def find_llvm_as():
    for c in ("/usr/lib/llvm-19/bin/llvm-as", shutil.which("llvm-as-19")):
        if c and os.access(c, os.X_OK):
            return c
    return None


class Runner:
    def __init__(self, verbose):
        self.verbose = verbose
        self.failures = []
        self.passed = 0

    def run(self, cmd, cwd=None):
        """Returns (rc, stdout bytes, stderr text); rc None on timeout."""
        if self.verbose:
            print("    $ " + " ".join(cmd))
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                               timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return None, b"", "timed out after %d s" % TIMEOUT_S
        return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")

    def check(self, what, ok, detail=""):
        print("  %-58s %s" % (what, "ok" if ok else "FAIL"), flush=True)
        if ok:
            self.passed += 1
        else:
            self.failures.append(what)
            for line in detail.rstrip().splitlines()[-20:]:
                print("      | " + line)


def describe(rc):
    if rc is None:
        return "timed out"
    if rc < 0:
        return "killed by signal %d" % -rc
    return "exit %d" % rc


def strip_c_comments(text):
    """Removes // and /* */ comments (CUDA C and PTX), keeping string literals."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            out.append(" ")
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_ll_comments(text):
    """Removes LLVM IR comments (`;` to the end of the line, outside quoted strings)."""
    lines = []
    for line in text.splitlines():
        inq, cut = False, len(line)
        for k, ch in enumerate(line):
            if ch == '"':
                inq = not inq
            elif ch == ";" and not inq:
                cut = k
                break
        lines.append(line[:cut])
    return "\n".join(lines)


SVG_NS = "{http://www.w3.org/2000/svg}"


def report_launches(text):
    """The kernel rows of an --emit report (lines starting with the launch index)."""
    return [line for line in text.splitlines() if line[:1].isdigit()]


def svg_points(path):
    """(points, labels) of a roofline chart; raises on malformed XML."""
    root = ET.parse(path).getroot()
    points = [c for c in root.iter(SVG_NS + "circle") if c.get("class") == "point"]
    labels = [t.text or "" for t in root.iter(SVG_NS + "text") if t.get("class") == "label"]
    return points, labels


def check_report_chart(r, fusec, tf, d, name):
    rep = os.path.join(d, name + ".txt")
    rc, _, err = r.run([fusec, tf, "--emit", "report", "-o", rep])
    if rc != 0:
        r.check("--emit report -o %s.txt" % name, False, "fusec %s\n%s" % (describe(rc), err))
        return
    text = open(rep, encoding="utf-8").read()
    rows = report_launches(text)
    tg = re.findall(r"^# (sm_80|sm_90|cpu) +[0-9.e+]+ +[0-9.e+]+ +[0-9.]+  (.*)$", text, re.M)
    ok = [t for t, _ in tg] == ["sm_80", "sm_90", "cpu"] and "measured: STREAM copy" in tg[2][1] and \
        "loop" in tg[2][1] and rows and all(len(re.findall(r" [0-9]+\.[0-9]{3} [MC]\b", x)) == 3 for x in rows)
    r.check("--emit report: sm_80, sm_90, measured cpu; %d launches" % len(rows), bool(ok), text[:3000])
    svg = os.path.join(d, name + ".svg")
    rc, _, err = r.run([fusec, tf, "--emit", "roofline", "-o", svg])
    if rc != 0:
        r.check("--emit roofline -o %s.svg" % name, False, "fusec %s\n%s" % (describe(rc), err))
        return
    try:
        points, labels = svg_points(svg)
        detail = "%d points, %d launches, labels %s" % (len(points), len(rows), labels[:20])
        ok = len(points) == len(rows) and len(labels) == len(rows) and \
            all(re.fullmatch(r"k[0-9]+_[a-z0-9_]+", x) for x in labels)
    except ET.ParseError as e:
        ok, detail = False, "not well-formed XML: %s" % e
    r.check("--emit roofline: well-formed, one point per launch", ok, detail)


def check_example(r, fusec, tf, work, tools):
    name = os.path.basename(tf)[:-3]
    d = os.path.join(work, name)
    os.makedirs(d)
    print("%s:" % name, flush=True)
    for kind, ext in (("ir", "ir"), ("kir", "kir"), ("llvm", "ll")):
        out = os.path.join(d, "%s.%s" % (name, ext))
        rc, _, err = r.run([fusec, tf, "--emit", kind, "-o", out])
        ok = rc == 0 and os.path.isfile(out) and os.path.getsize(out) > 0
        r.check("--emit %s -o %s.%s" % (kind, name, ext), ok, "fusec %s\n%s" % (describe(rc), err))
        if ok and kind == "llvm" and tools["llvm-as"]:
            rc, _, err = r.run([tools["llvm-as"], out, "-o", os.devnull])
            r.check("llvm-as %s.ll" % name, rc == 0, err)
    check_report_chart(r, fusec, tf, d, name)
    # Default output path: next to the input, with the kind's extension.
    side = os.path.join(d, "side")
    os.makedirs(side)
    shutil.copy(tf, side)
    rc, _, err = r.run([fusec, os.path.join(side, name + ".tf"), "--emit", "kir"])
    r.check("--emit kir without -o writes %s.kir beside the input" % name,
            rc == 0 and os.path.isfile(os.path.join(side, name + ".kir")),
            "fusec %s\n%s" % (describe(rc), err))
    if tools["nvrtc"]:
        for arch in ("sm_90", "sm_80"):
            rc, out, err = r.run([fusec, tf, "--emit", "ptx", "--arch", arch, "-o", "-"])
            text = out.decode("utf-8", "replace")
            ok = rc == 0 and re.search(r"^\s*\.target\s+%s\b" % arch, text, re.M) and \
                re.search(r"\.entry\b", text)
            r.check("--emit ptx --arch %s -o -" % arch, bool(ok),
                    "fusec %s\n%s" % (describe(rc), err or text[:2000]))
            if ok and tools["ptxas"]:
                ptx = os.path.join(d, "%s.%s.ptx" % (name, arch))
                with open(ptx, "wb") as f:
                    f.write(out)
                rc, out2, err = r.run([tools["ptxas"], "-v", "-arch=" + arch, ptx, "-o",
                                       os.path.join(d, "%s.%s.cubin" % (name, arch))])
                r.check("ptxas -arch=%s" % arch, rc == 0, err)
                # ptxas -v reports, per kernel, "N bytes spill stores, M bytes spill loads"
                report = out2.decode("utf-8", "replace") + err
                spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
                r.check("ptxas -v -arch=%s: no register spills" % arch,
                        bool(spills) and all(a == "0" and b == "0" for a, b in spills), report[-2000:])
            rc, out, err = r.run([fusec, tf, "--emit", "cubin", "--arch", arch, "-o", "-"])
            r.check("--emit cubin --arch %s -o -" % arch, rc == 0 and out[:4] == b"\x7fELF",
                    "fusec %s\n%s" % (describe(rc), err))
    if tools["nvcc"]:
        cu = os.path.join(d, name + ".cu")
        rc, _, err = r.run([fusec, tf, "-o", cu])
        ok = rc == 0 and os.path.isfile(cu) and os.path.getsize(cu) > 0
        r.check("-o %s.cu (--emit cuda, the default)" % name, ok,
                "fusec %s\n%s" % (describe(rc), err))
        if ok:
            rc, out, err = r.run([tools["nvcc"], "-arch=sm_90", "-c", cu, "-o",
                                  os.path.join(d, name + ".o"), "-Werror", "all-warnings"])
            msgs = (out.decode("utf-8", "replace") + err).strip()
            r.check("nvcc -arch=sm_90 -c %s.cu -Werror all-warnings" % name,
                    rc == 0 and "warning" not in msgs.lower(), "nvcc %s\n%s" % (describe(rc), msgs))
        check_train_unit(r, fusec, tf, d, name, tools)


TRAIN_ENTRY = "acc_train"
TRAIN_SYMBOLS = ["fusec_%s_%s" % (TRAIN_ENTRY, f) for f in
                 ("workspace_size", "saved_bytes", "forward", "backward_workspace_size", "backward")]


def check_train_unit(r, fusec, tf, d, name, tools):
    """The training unit (--train), fused and eager: nvcc -Werror all-warnings, ptxas -v with
    no spills, and its five entry points defined in the object."""
    for extra, tag in (([], "train"), (["--no-fuse"], "train_eager")):
        cu = os.path.join(d, "%s_%s.cu" % (name, tag))
        obj = cu[:-3] + ".o"
        rc, _, err = r.run([fusec, tf, "--train"] + extra + ["--entry", TRAIN_ENTRY, "-o", cu])
        r.check("--train %s-o %s_%s.cu" % (" ".join(extra) + " " if extra else "", name, tag),
                rc == 0 and os.path.isfile(cu), "fusec %s\n%s" % (describe(rc), err))
        if rc != 0:
            continue
        rc, out, err = r.run([tools["nvcc"], "-arch=sm_90", "-c", cu, "-o", obj, "-Werror", "all-warnings",
                              "-Xptxas", "-v"])
        msgs = (out.decode("utf-8", "replace") + err).strip()
        r.check("nvcc -arch=sm_90 -c %s_%s.cu -Werror all-warnings" % (name, tag),
                rc == 0 and "warning" not in msgs.lower(), "nvcc %s\n%s" % (describe(rc), msgs))
        spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", msgs)
        spilling = [line for line in msgs.splitlines() if "spill" in line and
                    not re.search(r"\b0 bytes spill stores, 0 bytes spill loads", line)]
        r.check("%s_%s.cu: ptxas -v reports no register spills (%d kernels)" % (name, tag, len(spills)),
                rc == 0 and bool(spills) and not spilling, msgs[-3000:])
        nm = find_tool("nm")
        if rc == 0 and nm:
            rc2, out2, err2 = r.run([nm, "-g", "--defined-only", obj])
            syms = set(x.split()[-1] for x in out2.decode("utf-8", "replace").splitlines() if x.strip())
            missing = [x for x in TRAIN_SYMBOLS if x not in syms]
            r.check("%s_%s.o defines the five training entry points" % (name, tag),
                    rc2 == 0 and not missing, "missing: %s\n%s" % (missing, err2))


def check_names(r, fusec, work, tools):
    tf = os.path.join(HERE, "names_marker.tf")
    d = os.path.join(work, "names_marker")
    os.makedirs(d)
    print("names_marker (user names only in comments):", flush=True)
    # --entry: the default entry point is fusec_<block>_forward, which would carry the
    # block's name by design (docs/cli.md); with --entry no user name is left to carry.
    kinds = [("llvm", "ll", strip_ll_comments)]
    if tools["nvrtc"]:
        kinds.append(("ptx", "ptx", strip_c_comments))
    kinds.append(("cuda", "cu", strip_c_comments))
    for kind, ext, strip in kinds:
        out = os.path.join(d, "names." + ext)
        rc, _, err = r.run([fusec, tf, "--emit", kind, "--entry", "accept_entry", "-o", out])
        if rc != 0:
            r.check("--emit %s of names_marker.tf" % kind, False,
                    "fusec %s\n%s" % (describe(rc), err))
            continue
        text = open(out, encoding="utf-8", errors="replace").read()
        code = strip(text)
        hits = [line.strip() for line in code.splitlines() if "zqmark" in line.lower()]
        r.check("--emit %s: no user name outside comments" % kind, not hits,
                "found in generated code:\n" + "\n".join(hits[:10]))
        if kind == "cuda":
            # docs/cli.md: the entry is fusec_<block>_forward, --entry replacing <block>.
            r.check("--emit cuda: the entry point is fusec_accept_entry_forward",
                    re.search(r"\bfusec_accept_entry_forward\b", code) is not None,
                    "no fusec_accept_entry_forward in the code")
    # The roofline chart: user names (the block's) may appear only as escaped text in its
    # title; the point labels are generated kernel names.
    svg = os.path.join(d, "names.svg")
    rc, _, err = r.run([fusec, tf, "--emit", "roofline", "-o", svg])
    try:
        labels = svg_points(svg)[1] if rc == 0 else None
    except ET.ParseError as e:
        labels, err = None, "not well-formed XML: %s" % e
    r.check("--emit roofline: no user name in the point labels",
            labels is not None and labels and not any("zqmark" in x.lower() for x in labels),
            "fusec %s\n%s\nlabels: %s" % (describe(rc), err, labels))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fusec", required=True)
    ap.add_argument("--only", action="append", help="example name (repeatable)")
    ap.add_argument("--no-names", action="store_true", help="skip the names_marker check")
    ap.add_argument("--names-only", action="store_true", help="only the names_marker check")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--no-nvcc", action="store_true",
                    help="skip nvcc and ptxas (a sanitizer build: the plain build assembles the same code)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    fusec = os.path.abspath(args.fusec)
    if not os.access(fusec, os.X_OK):
        print("check_emit.py: SKIP: %s is not an executable" % fusec)
        return 77
    tools = {"nvrtc": find_nvrtc(), "nvcc": find_tool("nvcc"), "ptxas": find_tool("ptxas"),
             "llvm-as": find_llvm_as()}
    if args.no_nvcc:
        tools["nvcc"] = tools["ptxas"] = None
    for k, v in tools.items():
        print("%-8s %s" % (k, v or ("--no-nvcc: the checks that need it are SKIPPED" if args.no_nvcc and
                                    k in ("nvcc", "ptxas") else "not found: the checks that need it are SKIPPED")))
    if args.only:
        files = [os.path.join(EXAMPLES_DIR, n + ".tf") for n in args.only]
    else:
        files = sorted(glob.glob(os.path.join(EXAMPLES_DIR, "*.tf")))
    if args.names_only:
        files = []
    r = Runner(args.verbose)
    work = tempfile.mkdtemp(prefix="fusec-emit-")
    try:
        for tf in files:
            if not os.path.isfile(tf):
                r.check("%s exists" % tf, False)
                continue
            check_example(r, fusec, tf, work, tools)
        if not args.no_names and (args.names_only or not args.only):
            check_names(r, fusec, work, tools)
    finally:
        if args.keep:
            print("kept %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    print()
    if r.failures:
        print("check_emit.py: %d passed, %d FAILED:" % (r.passed, len(r.failures)))
        for f in r.failures:
            print("  " + f)
        return 1
    print("check_emit.py: all %d checks passed" % r.passed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
