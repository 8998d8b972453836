#!/usr/bin/env python3
"""Runs the examples of README.md and docs/*.md, so that what the documentation says still works.

The convention (docs/correctness.md repeats it for writers):

* Every code block is fenced and says its language. ```sh (or bash, shell) is a shell example and
  ```python a Python example: both are run. Any other language (text, json, ini, cpp, cmake, ...)
  is shown, not run: output, file contents, code compiled elsewhere. A fence without a language,
  an indented code block, or a ```text block whose lines read as commands (`vit ...`, `curl ...`)
  is an error, so no example can slip past the runner.
* An HTML comment on the last non-blank line before a block changes how it runs:
    <!-- doc-example: skip (REASON) -->   not run; the reason is required and is counted in the summary
    <!-- doc-example: fails (TEXT) -->    run, and must exit non-zero with TEXT in its output (an example
                                          of a refusal: TEXT is a piece of the message, so the block
                                          cannot pass by failing for another reason)
    <!-- doc-example: background port=8080 -->
                                          a server: started in the background, waited for until the
                                          port accepts connections, stopped (SIGTERM) when the page
                                          ends. The runner picks a free port and replaces the literal
                                          port number in this block and every later block of the page.
  Any other `doc-example:` comment is an error, and so is a marker with no block after it.
* Each page runs in a fresh scratch folder of its own, block after block (files persist from one
  block to the next, shell variables do not): `vit` on PATH is the binary under test (--vit), so is
  `./build/vit` (./build holds links to --build-dir's entries with vit replaced), `python3` is
  --python, PYTHONPATH is --build-dir/python, and data/, tests/, examples/, tools/, scripts/, docs/
  and src/ are links to the source tree's (read them; write into the scratch folder). A page makes the
  model files its examples need in an earlier block (a few seconds of `vit train --steps N`) or
  uses the small files under tests/golden/. Shell blocks run with `bash -euo pipefail`.
* Python examples that import vit need the Python module (--build-dir/python/vit*.so); in a build
  without it (the sanitizer build) they, and shell blocks naming build/python, are counted as
  skipped for that reason.
* Relative links ([text](path) and [text](path#anchor)) must point at files of the source tree and,
  for Markdown files, at headings that exist.

Prints one line per page and a summary `N run, M skipped (reasons)`; exits non-zero when a block
fails or the convention is broken. Nothing is written into the source tree.

  python3 tests/docs/run_doc_examples.py --vit build/vit --build-dir build [--python /usr/bin/python3]
  python3 tests/docs/run_doc_examples.py --vit build/vit --build-dir build --list        # blocks only
  python3 tests/docs/run_doc_examples.py --vit build/vit --build-dir build docs/serving.md
"""
import argparse
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SHELL_LANGS = {"sh", "bash", "shell"}
PYTHON_LANGS = {"python", "py"}
MARKER = re.compile(r"^\s*<!--\s*doc-example:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)")
LIST_ITEM = re.compile(r"^\s{0,3}([*+-]|\d+[.)])\s")
# lines of a ```text block that read as a command someone could copy: they belong in ```sh
COMMAND_LIKE = re.compile(r"^\s*(\$ |\./build/|curl |mpirun |python3 |/usr/bin/python3 |cmake |sudo |apt |"
                          r"vit (train|eval|predict|embed|info|attention|bench|quantize|convert|serve|demo)(\s|$))")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
LINKED_ENTRIES = ["data", "tests", "examples", "tools", "scripts", "docs", "src"]


class Block:
    def __init__(self, page, line, lang, text, marker):
        self.page, self.line, self.lang, self.text, self.marker = page, line, lang, text, marker

    @property
    def where(self):
        return "%s:%d" % (self.page, self.line)

    def kind(self):
        if self.lang in SHELL_LANGS:
            return "shell"
        if self.lang in PYTHON_LANGS:
            return "python"
        return None


def parse_marker(text):
    """'skip (reason)' -> ('skip', reason), 'fails (text)' -> ('fails', text), 'background port=N' -> ('background', N);
    None for anything else."""
    m = re.fullmatch(r"(skip|fails)\s*\((.+)\)", text)
    if m and m.group(2).strip():
        return (m.group(1), m.group(2).strip())
    m = re.fullmatch(r"background\s+port=(\d+)", text)
    if m:
        return ("background", m.group(1))
    return None


def parse_page(path, rel):
    """Returns (blocks, errors)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks, errors = [], []
    pending = None  # (line number, parsed marker) waiting for its block
    in_list = False
    prev_blank = True
    i = 0
    while i < len(lines):
        line = lines[i]
        m = FENCE.match(line)
        if m:
            indent, fence, lang = len(m.group(1)), m.group(2), m.group(3).lower()
            start = i + 1
            body = []
            i += 1
            while i < len(lines) and not re.match(r"^\s*" + re.escape(fence[0]) + "{%d,}\\s*$" % len(fence), lines[i]):
                body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i].lstrip())
                i += 1
            if i == len(lines):
                errors.append("%s:%d: unclosed code fence" % (rel, start))
            if not lang:
                errors.append("%s:%d: a code block without a language: say ```sh, ```python or ```text" % (rel, start))
            marker = pending[1] if pending else None
            block = Block(rel, start, lang, "\n".join(body) + "\n", marker)
            if marker and block.kind() is None:
                errors.append("%s:%d: a doc-example marker before a ```%s block, which is never run"
                              % (rel, start, lang))
            if lang == "text":
                for k, b in enumerate(body):
                    if COMMAND_LIKE.match(b):
                        errors.append("%s:%d: a command in a ```text block (put commands in ```sh): %s"
                                      % (rel, start + 1 + k, b.strip()))
                        break
            blocks.append(block)
            pending = None
            i += 1
            prev_blank = False
            continue
        mk = MARKER.match(line)
        if mk:
            parsed = parse_marker(mk.group(1))
            if parsed is None:
                errors.append("%s:%d: unknown marker <!-- doc-example: %s --> (skip (REASON), fails (TEXT), "
                              "background port=N)" % (rel, i + 1, mk.group(1)))
            elif pending:
                errors.append("%s:%d: two doc-example markers in a row" % (rel, i + 1))
            pending = (i + 1, parsed)
            i += 1
            continue
        if "doc-example" in re.sub(r"`[^`]*`", "", line) and "<!--" in re.sub(r"`[^`]*`", "", line):
            errors.append("%s:%d: a doc-example comment must stand alone on its line" % (rel, i + 1))
        stripped = line.strip()
        if stripped:
            if pending:
                errors.append("%s:%d: a doc-example marker not followed by a code block" % (rel, pending[0]))
                pending = None
            if LIST_ITEM.match(line):
                in_list = True
            elif not line.startswith(" ") and not line.startswith("\t"):
                in_list = False
            elif prev_blank and not in_list and (line.startswith("    ") or line.startswith("\t")):
                errors.append("%s:%d: an indented code block: fence it and give its language (```sh, ```text)"
                              % (rel, i + 1))
                while i + 1 < len(lines) and (lines[i + 1].startswith("    ") or not lines[i + 1].strip()):
                    i += 1
        prev_blank = not stripped
        i += 1
    if pending:
        errors.append("%s:%d: a doc-example marker not followed by a code block" % (rel, pending[0]))
    return blocks, errors


def slug(heading):
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to hyphens."""
    s = heading.strip().lower()
    s = re.sub(r"[`*]|<[^>]+>", "", s)
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", s)
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors_of(path):
    found, seen, in_fence = set(), {}, False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            m = None if in_fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                base = slug(m.group(1))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else "%s-%d" % (base, n))
    return found


def check_links(path, rel, root):
    errors = []
    text = open(path, encoding="utf-8").read()
    text_no_code = re.sub(r"(?ms)^\s*(```|~~~).*?^\s*(```|~~~)\s*$", "", text)
    text_no_code = re.sub(r"`[^`\n]*`", "", text_no_code)
    for m in LINK.finditer(text_no_code):
        target = m.group(1) or m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        if not os.path.realpath(dest).startswith(os.path.realpath(root)) or not os.path.exists(dest):
            errors.append("%s: a link to %s, which does not exist" % (rel, target))
            continue
        if anchor and dest.endswith(".md") and anchor not in anchors_of(dest):
            errors.append("%s: a link to %s: no heading makes the anchor #%s" % (rel, target, anchor))
    return errors


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port):
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def stop(proc, timeout=15):
    """SIGTERM to the block's process group, then SIGKILL; returns the exit status."""
    if proc.poll() is not None:
        return proc.returncode
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait()
    except ProcessLookupError:
        return proc.wait()


def make_scratch(scratch, root, build_dir, vit, python):
    os.makedirs(scratch)
    for name in LINKED_ENTRIES:
        if os.path.exists(os.path.join(root, name)):
            os.symlink(os.path.join(root, name), os.path.join(scratch, name))
    build = os.path.join(scratch, "build")
    os.makedirs(build)
    for entry in os.listdir(build_dir):
        if entry != "vit":
            os.symlink(os.path.join(build_dir, entry), os.path.join(build, entry))
    os.symlink(vit, os.path.join(build, "vit"))
    bindir = os.path.join(scratch, ".bin")
    os.makedirs(bindir)
    os.symlink(vit, os.path.join(bindir, "vit"))
    os.symlink(python, os.path.join(bindir, "python3"))
    os.symlink(python, os.path.join(bindir, "python"))
    return bindir


class Runner:
    def __init__(self, args, root):
        self.args, self.root = args, root
        self.vit = os.path.abspath(args.vit)
        self.build_dir = os.path.abspath(args.build_dir)
        self.python = os.path.abspath(args.python) if args.python else sys.executable
        self.has_module = bool(glob.glob(os.path.join(self.build_dir, "python", "vit*.so")))
        self.run_count, self.kinds, self.skips, self.failures = 0, {}, {}, []

    def skip(self, reason):
        self.skips[reason] = self.skips.get(reason, 0) + 1

    def needs_module(self, block):
        if block.kind() == "python":
            return re.search(r"^\s*(import vit\b|from vit\b|import .*\bvit\b)", block.text, re.M) is not None
        return "build/python" in block.text

    def run_page(self, rel, blocks, scratch_root):
        runnable = [b for b in blocks if b.kind()]
        if not runnable:
            return "no examples"
        scratch = os.path.join(scratch_root, re.sub(r"[^\w.-]", "_", rel))
        bindir = make_scratch(scratch, self.root, self.build_dir, self.vit, self.python)
        env = dict(os.environ)
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
        env["PYTHONPATH"] = os.path.join(self.build_dir, "python")
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["VIT_DOC_EXAMPLE"] = "1"
        ports = {}  # the port a page names -> the free one used instead
        servers = []
        counts = {"run": 0, "skipped": 0}
        try:
            for n, block in enumerate(runnable):
                marker = block.marker or (None, None)
                if marker[0] == "skip":
                    self.skip(marker[1])
                    counts["skipped"] += 1
                    continue
                if self.needs_module(block) and not self.has_module:
                    self.skip("the Python module is not in this build")
                    counts["skipped"] += 1
                    continue
                text = block.text
                if marker[0] == "background" and marker[1] not in ports:
                    ports[marker[1]] = str(free_port())
                for named, used in ports.items():
                    text = re.sub(r"(?<!\d)%s(?!\d)" % named, used, text)
                ext = ".py" if block.kind() == "python" else ".sh"
                script = os.path.join(scratch, ".block%02d%s" % (n, ext))
                with open(script, "w") as f:
                    f.write(text)
                cmd = [self.python, script] if block.kind() == "python" else ["bash", "-euo", "pipefail", script]
                t0 = time.time()
                if marker[0] == "background":
                    log = open(script + ".log", "w")
                    proc = subprocess.Popen(cmd, cwd=scratch, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
                    servers.append((proc, block, script + ".log"))
                    port = int(ports[marker[1]])
                    deadline = time.time() + self.args.timeout
                    while not port_open(port):
                        if proc.poll() is not None or time.time() > deadline:
                            stop(proc)
                            self.fail(block, text, "the server %s before port %d accepted connections" % (
                                "exited with status %s" % proc.returncode if proc.returncode is not None
                                else "timed out", port), open(script + ".log").read())
                            return self.page_line(counts, failed=True)
                        time.sleep(0.1)
                else:
                    proc = subprocess.Popen(cmd, cwd=scratch, env=env, stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, start_new_session=True)
                    try:
                        out, _ = proc.communicate(timeout=self.args.timeout)
                    except subprocess.TimeoutExpired:
                        stop(proc)
                        out, _ = proc.communicate()
                        self.fail(block, text, "timed out after %d s" % self.args.timeout, out.decode(errors="replace"))
                        return self.page_line(counts, failed=True)
                    out = out.decode(errors="replace")
                    if marker[0] == "fails" and (proc.returncode == 0 or marker[1] not in out):
                        self.fail(block, text, "exited with status %d; the page shows a refusal saying %r" % (
                            proc.returncode, marker[1]), out)
                        return self.page_line(counts, failed=True)
                    if marker[0] != "fails" and proc.returncode != 0:
                        self.fail(block, text, "exited with status %d" % proc.returncode, out)
                        return self.page_line(counts, failed=True)
                    if self.args.verbose and out.strip():
                        print("\n".join("    | " + x for x in out.rstrip().split("\n")[-self.args.verbose_lines:]))
                if self.args.verbose:
                    print("  %s (%s%s): %.1f s" % (block.where, block.kind(), ", " + marker[0] if marker[0] else "",
                                                   time.time() - t0), flush=True)
                counts["run"] += 1
                self.run_count += 1
                kind = block.kind() + (" (%s)" % marker[0] if marker[0] else "")
                self.kinds[kind] = self.kinds.get(kind, 0) + 1
        finally:
            for proc, block, log in servers:
                status = stop(proc)
                if self.args.verbose:
                    print("  %s: server stopped (status %s)" % (block.where, status))
        return self.page_line(counts)

    @staticmethod
    def page_line(counts, failed=False):
        return "%d run, %d skipped%s" % (counts["run"], counts["skipped"], ", FAILED" if failed else "")

    def fail(self, block, text, why, output):
        tail = "\n".join(output.rstrip().split("\n")[-40:])
        self.failures.append("%s: the ```%s block %s\n--- the block:\n%s--- its output (last 40 lines):\n%s\n"
                             % (block.where, block.lang, why, text, tail))


def main():
    root_default = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("pages", nargs="*", help="pages to run (default: README.md and docs/*.md)")
    ap.add_argument("--vit", required=True, help="the vit binary under test")
    ap.add_argument("--build-dir", required=True, help="its build folder (./build in the examples)")
    ap.add_argument("--source-dir", default=root_default, help="the repository (default: this script's)")
    ap.add_argument("--python", help="the interpreter for Python examples and `python3` (default: this one)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per block (default 300)")
    ap.add_argument("--list", action="store_true", help="check the convention and list the blocks; run nothing")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folders (printed)")
    ap.add_argument("--verbose", "-v", action="store_true", help="print each block as it runs, and its output's end")
    ap.add_argument("--verbose-lines", type=int, default=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    root = os.path.abspath(args.source_dir)
    if not os.access(args.vit, os.X_OK):
        ap.error("--vit %s is not an executable" % args.vit)
    if not os.path.isdir(args.build_dir):
        ap.error("--build-dir %s is not a folder" % args.build_dir)
    if args.pages:
        pages = [os.path.relpath(os.path.abspath(p), root) for p in args.pages]
    else:
        pages = ["README.md"] + sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md")))

    parsed, errors = [], []
    for rel in pages:
        path = os.path.join(root, rel)
        if not os.path.isfile(path):
            errors.append("%s: no such page" % rel)
            continue
        blocks, errs = parse_page(path, rel)
        errors += errs + check_links(path, rel, root)
        parsed.append((rel, blocks))
    if errors:
        print("the documentation breaks the examples' convention (see %s --help):" % sys.argv[0])
        print("\n".join("  " + e for e in errors))
        return 1
    if args.list:
        for rel, blocks in parsed:
            for b in blocks:
                if b.kind():
                    m = b.marker[0] + (" (%s)" % b.marker[1] if b.marker[1] else "") if b.marker else "run"
                    print("%s  %s  %s" % (b.where, b.kind(), m))
        return 0

    runner = Runner(args, root)
    start = time.time()
    scratch_root = tempfile.mkdtemp(prefix="vit-doc-examples-")
    try:
        for rel, blocks in parsed:
            t0 = time.time()
            line = runner.run_page(rel, blocks, scratch_root)
            print("%-28s %s (%.1f s)" % (rel, line, time.time() - t0), flush=True)
    finally:
        if args.keep:
            print("scratch folders kept in %s" % scratch_root)
        else:
            shutil.rmtree(scratch_root, ignore_errors=True)
    for f in runner.failures:
        print("\nFAILED " + f)
    kinds = ", ".join("%s %d" % (k, v) for k, v in sorted(runner.kinds.items()))
    skipped = sum(runner.skips.values())
    print("doc examples: %d run (%s), %d skipped, %d failed; %.1f s"
          % (runner.run_count, kinds, skipped, len(runner.failures), time.time() - start))
    for reason, n in sorted(runner.skips.items(), key=lambda kv: (-kv[1], kv[0])):
        print("  skipped %d: %s" % (n, reason))
    return 1 if runner.failures else 0


if __name__ == "__main__":
    sys.exit(main())
