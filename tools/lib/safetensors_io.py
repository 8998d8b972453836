"""Safetensors files by hand (no `safetensors` package): the writer and reader the PyTorch scripts
of tools/ share (golden files, int8 references, peer comparisons).

Format: an 8-byte little-endian header length, a JSON header padded with spaces to a multiple of
8 bytes (tensor entries in write order, string metadata under "__metadata__"), then the tensors'
raw little-endian C-contiguous bytes in the order given. dtypes: F64, F32, F16, BF16 (rounded to
nearest even from float32; a BF16 torch tensor is written bit for bit), I8, I32, I64.

    from lib.safetensors_io import SafeTensorsWriter, read_safetensors, write_safetensors

(after the path bootstrap every script of tools/<job>/ opens with; see tools/README.md). Needs
numpy and torch (Debian's python3-numpy, python3-torch). Converting a PyTorch file into one of
vit's checkpoints is `vit convert IN OUT`.
"""

import json
import os
import struct

import numpy as np
import torch

DTYPE_SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I8": 1, "I32": 4, "I64": 8}


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
