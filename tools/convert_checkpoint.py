#!/usr/bin/env python3
"""Convert a PyTorch state dict (.pth / .pt / .bin) into a .safetensors file.

Usage (Debian's system interpreter has torch):

    /usr/bin/python3 tools/convert_checkpoint.py in.pth out.safetensors [--metadata key=value ...]

- The file is read with torch.load(map_location='cpu'), first with weights_only=True; a file that
  needs full unpickling (e.g. a training checkpoint holding an argparse Namespace) is refused
  unless --allow-pickle is given (unpickling runs arbitrary code: only for files you trust).
- If the loaded object is a dict with a 'state_dict' or 'model' entry that is itself a dict, that
  entry is used (repeatedly, so {'model': {'state_dict': ...}} works too). Non-tensor entries are
  skipped with a note.
- Keys are kept exactly as they are. Every tensor is made contiguous; F32/F16/BF16 keep their
  dtype, every other dtype (F64, integers, bool) is cast to F32.
- Metadata: {"format": "pt"} plus every --metadata key=value (values are strings).

The safetensors writer/reader here is hand-written (no `safetensors` package) and is also used
by tools/make_golden_layouts.py: 8-byte little-endian header length, JSON header padded with
spaces to a multiple of 8 bytes, then the tensors' raw little-endian C-contiguous bytes in the
order given. Supported dtypes: F64, F32, F16, BF16.
"""

import argparse
import json
import os
import struct
import sys

import numpy as np
import torch

DTYPE_SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I8": 1, "I32": 4, "I64": 8}
TORCH_TO_ST = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64"}


# ----------------------------------------------------------------------------------------
# dtype conversion
# ----------------------------------------------------------------------------------------

def f32_to_bf16_bits(a):
    """float32 array -> uint16 array of bfloat16 bit patterns, round-to-nearest-even.

    NaNs stay NaN (quiet bit set); infinities and overflow to infinity follow from the rounding.
    """
    a = np.asarray(a, dtype="<f4")
    u = a.view("<u4").astype(np.uint64)
    lsb = (u >> 16) & 1
    r = ((u + 0x7FFF + lsb) >> 16) & 0xFFFF
    nan = np.isnan(a)
    if nan.any():
        r = np.where(nan, ((u >> 16) | 0x0040) & 0xFFFF, r)
    return r.astype("<u2")


def bf16_bits_to_f32(bits):
    """uint16 array of bfloat16 bit patterns -> float32 array (exact)."""
    return (np.asarray(bits, dtype="<u2").astype("<u4") << 16).view("<f4")


def round_to_dtype(t, dtype):
    """Round a float tensor to F16/BF16/F32 and widen back to float32 (torch tensor)."""
    a = t.detach().to(torch.float32).contiguous().numpy()
    if dtype == "F32":
        r = a.copy()
    elif dtype == "F16":
        r = a.astype("<f2").astype("<f4")
    elif dtype == "BF16":
        r = bf16_bits_to_f32(f32_to_bf16_bits(a))
    else:
        raise ValueError(dtype)
    return torch.from_numpy(np.array(r, dtype=np.float32, order="C"))


def tensor_bytes(t, dtype):
    """Raw little-endian C-order bytes of t (torch tensor or numpy array) as `dtype`.

    A BF16 torch tensor is written bit-exactly; any other source is converted from its value
    (float32 -> BF16 with round-to-nearest-even, -> F16 with numpy's round-to-nearest-even).
    """
    if isinstance(t, torch.Tensor):
        t = t.detach().cpu().contiguous()
        if t.dtype == torch.bfloat16:
            bits = t.view(torch.int16).numpy().view("<u2")
            if dtype == "BF16":
                return np.array(bits, order="C").tobytes(), tuple(t.shape)
            a = bf16_bits_to_f32(bits)
        elif t.dtype == torch.bool:
            a = t.to(torch.float32).numpy()
        else:
            a = t.numpy()
    else:
        a = np.asarray(t)
    shape = tuple(a.shape)
    if dtype == "F64":
        arr = np.array(a, dtype="<f8", order="C")
    elif dtype == "F32":
        arr = np.array(a, dtype="<f4", order="C")
    elif dtype == "F16":
        arr = np.array(a, dtype="<f2", order="C")
    elif dtype == "BF16":
        arr = np.array(f32_to_bf16_bits(np.array(a, dtype="<f4")), order="C")
    elif dtype in ("I8", "I32", "I64"):  # integers: the values must fit (checked, never wrapped)
        np_dt = {"I8": "<i1", "I32": "<i4", "I64": "<i8"}[dtype]
        arr = np.array(a, dtype=np_dt, order="C")
        assert np.array_equal(arr.astype(np.int64), np.asarray(a).astype(np.int64)), "integer overflow"
    else:
        raise ValueError("unsupported dtype %r" % dtype)
    assert arr.shape == shape
    return arr.tobytes(order="C"), shape


# ----------------------------------------------------------------------------------------
# writer / reader
# ----------------------------------------------------------------------------------------

class SafeTensorsWriter:
    """Ordered collection of (name, tensor, dtype) plus string metadata."""

    def __init__(self, path, default_dtype="F32"):
        self.path = path
        self.default_dtype = default_dtype
        self.entries = []  # (name, bytes, shape, dtype)
        self.metadata = {}

    def add(self, name, t, dtype=None):
        dtype = dtype or self.default_dtype
        if dtype not in DTYPE_SIZE:
            raise ValueError("unsupported dtype %r" % dtype)
        if any(e[0] == name for e in self.entries):
            raise ValueError("duplicate tensor name %r in %s" % (name, self.path))
        data, shape = tensor_bytes(t, dtype)
        n = int(np.prod(shape, dtype=np.int64)) if shape else 1
        assert len(data) == n * DTYPE_SIZE[dtype], name
        self.entries.append((name, data, shape, dtype))

    def meta(self, key, value):
        self.metadata[str(key)] = str(value)

    def write(self):
        header = {}
        if self.metadata:
            header["__metadata__"] = dict(self.metadata)
        offset = 0
        for name, data, shape, dtype in self.entries:
            header[name] = {"dtype": dtype, "shape": list(shape),
                            "data_offsets": [offset, offset + len(data)]}
            offset += len(data)
        hbytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
        hbytes += b" " * ((-len(hbytes)) % 8)
        d = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(d, exist_ok=True)
        with open(self.path, "wb") as f:
            f.write(struct.pack("<Q", len(hbytes)))
            f.write(hbytes)
            for _, data, _, _ in self.entries:
                f.write(data)
        return self.path


def write_safetensors(path, tensors, metadata=None, dtype="F32"):
    """tensors: iterable of (name, tensor) or (name, tensor, dtype)."""
    w = SafeTensorsWriter(path, dtype)
    for e in tensors:
        w.add(*e)
    for k, v in (metadata or {}).items():
        w.meta(k, v)
    return w.write()


def read_safetensors(path):
    """Returns (ordered list of (name, torch.Tensor in its stored dtype), metadata, dtypes dict)."""
    with open(path, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    assert hlen % 8 == 0, "header not padded to 8 bytes"
    header = json.loads(raw[8:8 + hlen].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items())
    body = raw[8 + hlen:]
    out, dtypes, expect = [], {}, 0
    for name, info in header.items():  # JSON object order == write order
        dt = info["dtype"]
        b, e = info["data_offsets"]
        assert b == expect, "tensors not contiguous at %s" % name
        shape = info["shape"]
        n = int(np.prod(shape, dtype=np.int64)) if shape else 1
        assert e - b == DTYPE_SIZE[dt] * n, name
        buf = body[b:e]
        if dt == "BF16":
            bits = np.frombuffer(buf, dtype="<i2").copy().reshape(shape)
            t = torch.from_numpy(bits).view(torch.bfloat16)
        else:
            np_dt = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I8": "<i1", "I32": "<i4", "I64": "<i8"}[dt]
            t = torch.from_numpy(np.frombuffer(buf, dtype=np_dt).copy().reshape(shape))
        out.append((name, t))
        dtypes[name] = dt
        expect = e
    assert expect == len(body), "trailing bytes in %s" % path
    return out, meta, dtypes


# ----------------------------------------------------------------------------------------
# conversion
# ----------------------------------------------------------------------------------------

def load_state_dict(path, allow_pickle=False):
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 -- torch raises UnpicklingError/RuntimeError
        if not allow_pickle:
            sys.exit("error: %s cannot be loaded with weights_only=True (%s).\n"
                     "If you trust the file, rerun with --allow-pickle." % (path, str(e).splitlines()[0]))
        print("note: loading %s with full unpickling (--allow-pickle)" % path)
        obj = torch.load(path, map_location="cpu")
    while isinstance(obj, dict):
        inner = None
        for k in ("state_dict", "model"):
            if isinstance(obj.get(k), dict):
                inner = k
                break
        if inner is None:
            break
        print("using the %r entry of the checkpoint" % inner)
        obj = obj[inner]
    if not isinstance(obj, dict):
        sys.exit("error: %s does not hold a state dict (got %s)" % (path, type(obj).__name__))
    return obj


def convert(in_path, out_path, metadata=None, allow_pickle=False):
    sd = load_state_dict(in_path, allow_pickle)
    w = SafeTensorsWriter(out_path)
    w.meta("format", "pt")
    for k, v in (metadata or {}).items():
        w.meta(k, v)
    cast = 0
    for name, t in sd.items():
        if not isinstance(t, torch.Tensor):
            print("skipping non-tensor entry %r (%s)" % (name, type(t).__name__))
            continue
        dtype = TORCH_TO_ST.get(t.dtype)
        if dtype not in ("F32", "F16", "BF16"):
            cast += 1
            print("casting %s from %s to F32" % (name, t.dtype))
            t = t.to(torch.float32)
            dtype = "F32"
        w.add(str(name), t, dtype)
    w.write()
    print("wrote %s: %d tensors (%d cast to F32), %d bytes"
          % (out_path, len(w.entries), cast, os.path.getsize(out_path)))
    return w


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("input", help=".pth / .pt / .bin PyTorch state dict")
    ap.add_argument("output", help=".safetensors file to write")
    ap.add_argument("--metadata", action="append", default=[], metavar="KEY=VALUE",
                    help="string metadata entry (repeatable)")
    ap.add_argument("--allow-pickle", action="store_true",
                    help="allow full unpickling when weights_only loading fails (trusted files only)")
    args = ap.parse_args(argv)
    meta = {}
    for kv in args.metadata:
        if "=" not in kv:
            ap.error("--metadata expects key=value, got %r" % kv)
        k, v = kv.split("=", 1)
        meta[k] = v
    convert(args.input, args.output, meta, args.allow_pickle)


if __name__ == "__main__":
    main()
