#!/usr/bin/env python3
"""Generate the golden reference files in tests/golden/ (see tests/golden/SPEC.md).

Requirements: PyTorch (tested with 1.13). On the development machine this is Debian's
python3-torch package, so run it with the system interpreter:

    /usr/bin/python3 tools/golden/make_golden.py

(The `python3` first on PATH may be a pyenv interpreter without torch.)

The script takes no arguments, is deterministic (same bytes every run with the same
PyTorch build), writes every file into tests/golden/ next to this repository's root,
prints each file with its size, then re-reads every file with its own reader and checks
that the tensor names/shapes/values round-trip.

Files are written by hand (no `safetensors` package): 8-byte little-endian header length,
JSON header padded with spaces to a multiple of 8 bytes, then the tensors' raw F64
little-endian C-contiguous bytes in the order they were added.

Value generation: every input, parameter and upstream gradient is drawn in float32 from a
seeded generator (`torch.manual_seed(<fixed per case>)`), then widened to float64; forward
and backward run in float64 with requires_grad on the float64 leaves. Gradients are stored
as `grad.<name>` (with the case prefix in front where the case has one).
"""

import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: lib, golden, ... import
# the writer/reader and helpers live in tools/golden/ops_common.py, the cases in ops_cases.py
from golden.ops_cases import CASES  # noqa: E402
from golden.ops_common import read_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_DIR = os.path.join(ROOT, "tests", "golden")

torch.use_deterministic_algorithms(True)
torch.set_num_threads(1)


# ----------------------------------------------------------------------------------------
# self-check
# ----------------------------------------------------------------------------------------

def self_check(written):
    """Re-read every file and compare names, order, shapes, values and metadata."""
    total = 0
    for g, path in written:
        tensors, meta = read_safetensors(path)
        assert [n for n, _ in tensors] == [n for n, _ in g.tensors], path
        for (n, got), (_, want) in zip(tensors, g.tensors):
            assert got.shape == want.shape, (path, n, got.shape, want.shape)
            assert np.array_equal(got, want, equal_nan=True), (path, n)
            assert np.all(np.isfinite(got)), (path, n)
        assert meta == g.metadata, path
        total += os.path.getsize(path)
    return total


def main():
    if len(sys.argv) > 1:
        sys.exit("usage: %s   (takes no arguments)" % sys.argv[0])
    os.makedirs(OUT_DIR, exist_ok=True)
    written = []
    for case in CASES:
        g = case()
        path = g.write(OUT_DIR)
        written.append((g, path))
        print("wrote %-60s %10d bytes" % (os.path.relpath(path, ROOT), os.path.getsize(path)))
    total = self_check(written)
    print("self-check OK: %d files, %d tensors, total %d bytes (%.2f MB)"
          % (len(written), sum(len(g.tensors) for g, _ in written), total, total / 1e6))


if __name__ == "__main__":
    main()
