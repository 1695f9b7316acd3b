#!/usr/bin/env python3
"""doctest.py: runs the shell commands that README.md and docs/*.md show, and checks them.

Conventions for fenced code blocks (the first word after the fence is the block's kind):
  ```sh           every line is a command (a trailing `\\` continues it; `#` lines are
                  comments); each must exit 0.
  ```console      lines starting with `$ ` are commands; the lines after one, up to the next
                  `$ ` line, are its expected output (stdout and stderr together), in order:
                  a line `...` stands for any number of lines, and `...` inside a line for any
                  text. Without output lines only the exit status (0) is checked.
  ```sh no-test REASON, ```console no-test REASON
                  shown but not run (it needs a GPU, installs things, rebuilds, takes
                  minutes); the test lists each with its reason.
  ```tf file=NAME written to NAME in the scratch folder before the page's commands run, so a
                  page can show a block and then compile it.
  any other kind  (tf, c, cmake, json, text, ...) is not run. A block with no kind is an error:
                  say what it is, so that no command escapes the test by accident.
Commands run with bash in one scratch folder per page, in page order, each under a timeout,
with the build's fusec first on PATH. The folder holds a copy of examples/, `build` (the
build folder) and links to the rest of the repository, so `build/fusec examples/x.tf` works
as written and nothing is written into the repository.

usage: doctest.py --repo DIR --build DIR [--timeout S] [FILE.md ...]   (default: README.md docs/*.md)
Exit 0 when every run command passed, 1 when one failed (each failure is printed).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*(.*)$")


def blocks(path):
    """Yields (line, info, body lines) for each fenced block of the file."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.group(1), m.group(2), m.group(3).strip()
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not (lines[i].strip().startswith(fence) and lines[i].strip().strip(fence[0]) == ""):
            line = lines[i]
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
            i += 1
        i += 1
        yield start, info, body


def sh_commands(body):
    """The commands of an sh block: (command, []) with no expected output."""
    out, cur = [], ""
    for line in body:
        if not cur and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        out.append((cur + line, None))
        cur = ""
    if cur:
        out.append((cur, None))
    return out


def console_commands(body):
    """The commands of a console block with their expected output lines (None: not shown)."""
    out = []
    for line in body:
        if line.startswith("$ "):
            out.append([line[2:], []])
        elif out:
            out[-1][1].append(line)
    res = []
    for cmd, exp in out:
        while exp and not exp[-1].strip():
            exp.pop()
        res.append((cmd, exp if exp else None))
    return res


def line_matches(pattern, text):
    parts = pattern.split("...")
    rx = ".*".join(re.escape(p) for p in parts)
    return re.fullmatch(rx, text) is not None


def output_matches(expected, got):
    """Expected lines against got lines; `...` alone matches any run of lines."""
    def rec(i, j):
        if i == len(expected):
            return j == len(got)
        if expected[i].strip() == "...":
            return any(rec(i + 1, k) for k in range(j, len(got) + 1))
        return j < len(got) and line_matches(expected[i].rstrip(), got[j].rstrip()) and rec(i + 1, j + 1)
    return rec(0, 0)


def make_scratch(repo, build):
    d = tempfile.mkdtemp(prefix="fusec-doctest-")
    for name in os.listdir(repo):
        if name in (".git", "build") or name.startswith("build"):
            continue
        src = os.path.join(repo, name)
        if name == "examples":
            shutil.copytree(src, os.path.join(d, name), symlinks=True)
        else:
            os.symlink(src, os.path.join(d, name))
    os.symlink(build, os.path.join(d, "build"))
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    repo, build = os.path.abspath(a.repo), os.path.abspath(a.build)
    files = a.files or [os.path.join(repo, "README.md")] + sorted(
        os.path.join(repo, "docs", f) for f in os.listdir(os.path.join(repo, "docs")) if f.endswith(".md"))
    env = dict(os.environ)
    env["PATH"] = build + os.pathsep + env.get("PATH", "")
    env.setdefault("FUSEC_CACHE_DIR", os.path.join(build, "test-cache"))
    ran = passed = 0
    failures, skipped = [], []
    t0 = time.time()
    for path in files:
        rel = os.path.relpath(path, repo) if path.startswith(repo + os.sep) else path
        scratch = make_scratch(repo, build)
        try:
            page = list(blocks(path))
            for line, info, body in page:   # files first: a page may show a block, then use it
                m = re.search(r"\bfile=(\S+)", info)
                if m:
                    with open(os.path.join(scratch, m.group(1)), "w", encoding="utf-8") as f:
                        f.write("\n".join(body) + "\n")
            for line, info, body in page:
                words = info.split()
                kind = words[0] if words else ""
                where = f"{rel}:{line}"
                if not kind:
                    failures.append(f"{where}: a fenced block without a kind; mark it (sh, console, text, tf, c, ...)")
                    continue
                if kind not in ("sh", "console"):
                    continue
                if "no-test" in words:
                    reason = " ".join(words[words.index("no-test") + 1:]) or "(no reason given)"
                    skipped.append(f"{where}: {reason}")
                    continue
                cmds = sh_commands(body) if kind == "sh" else console_commands(body)
                for cmd, expected in cmds:
                    ran += 1
                    t1 = time.time()
                    try:
                        p = subprocess.run(["bash", "-c", cmd], cwd=scratch, env=env, stdin=subprocess.DEVNULL,
                                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=a.timeout)
                        text, rc = p.stdout.decode("utf-8", "replace"), p.returncode
                    except subprocess.TimeoutExpired:
                        failures.append(f"{where}: `{cmd}` did not finish in {a.timeout:g} s")
                        continue
                    if rc != 0:
                        failures.append(f"{where}: `{cmd}` exited {rc}:\n    " +
                                        "\n    ".join(text.rstrip().split("\n")[-8:]))
                        continue
                    if time.time() - t1 > 5:
                        print(f"slow {where}: `{cmd}` took {time.time() - t1:.1f} s")
                    got = text.rstrip("\n").split("\n") if text.strip() else []
                    if expected is not None and not output_matches(expected, got):
                        failures.append(f"{where}: `{cmd}` printed something else than the page shows.\n"
                                        "  expected:\n    " + "\n    ".join(expected) +
                                        "\n  got:\n    " + "\n    ".join(got[:40]))
                        continue
                    passed += 1
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    for s in skipped:
        print(f"skipped {s}")
    for f in failures:
        print(f"FAIL {f}")
    print(f"doctest: {len(files)} pages, {ran} commands run, {passed} passed, {len(failures)} failed, "
          f"{len(skipped)} blocks marked no-test ({time.time() - t0:.1f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
