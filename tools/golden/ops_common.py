"""make_golden.py's shared pieces: the F64 safetensors writer (Golden) and reader, the seeded value
draws (float32 widened to float64 leaves), and the timm attention / MLP formulas (make_golden_vit.py
imports these too)."""

import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F

B, N, D = 3, 197, 65


# ----------------------------------------------------------------------------------------
# safetensors writer / reader (F64 only)
# ----------------------------------------------------------------------------------------

class Golden:
    """Ordered collection of named float64 tensors plus string metadata."""

    def __init__(self, name):
        self.name = name
        self.tensors = []  # list of (name, np.ndarray float64)
        self.metadata = {}

    def add(self, name, t):
        if any(n == name for n, _ in self.tensors):
            raise ValueError("duplicate tensor name %r in %s" % (name, self.name))
        shape = tuple(t.shape)
        if isinstance(t, torch.Tensor):
            t = t.detach().to(torch.float64).contiguous().cpu().numpy()
        # np.array (not np.ascontiguousarray, which turns 0-dim into 1-dim) keeps the shape
        arr = np.array(t, dtype="<f8", order="C", copy=True)
        assert arr.shape == shape and arr.flags["C_CONTIGUOUS"], (name, arr.shape, shape)
        self.tensors.append((name, arr))

    def meta(self, key, value):
        self.metadata[str(key)] = str(value)

    def write(self, out_dir):
        header = {}
        if self.metadata:
            header["__metadata__"] = dict(self.metadata)
        offset = 0
        blobs = []
        for name, arr in self.tensors:
            data = arr.tobytes(order="C")
            header[name] = {
                "dtype": "F64",
                "shape": list(arr.shape),
                "data_offsets": [offset, offset + len(data)],
            }
            offset += len(data)
            blobs.append(data)
        hbytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
        hbytes += b" " * ((-len(hbytes)) % 8)
        path = os.path.join(out_dir, self.name)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(hbytes)))
            f.write(hbytes)
            for data in blobs:
                f.write(data)
        return path


def read_safetensors(path):
    """Minimal reader: returns (ordered list of (name, np.ndarray), metadata dict)."""
    with open(path, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    assert hlen % 8 == 0, "header not padded to 8 bytes"
    header = json.loads(raw[8:8 + hlen].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items())
    body = raw[8 + hlen:]
    out = []
    expect = 0
    for name, info in header.items():  # JSON object order == write order
        assert info["dtype"] == "F64", name
        b, e = info["data_offsets"]
        assert b == expect, "tensors not contiguous at %s" % name
        n = int(np.prod(info["shape"], dtype=np.int64)) if info["shape"] else 1
        assert e - b == 8 * n, name
        arr = np.frombuffer(body[b:e], dtype="<f8").reshape(info["shape"])
        out.append((name, arr))
        expect = e
    assert expect == len(body), "trailing bytes in %s" % path
    return out, meta


# ----------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------

def randn(*shape, scale=1.0, shift=0.0):
    """float32 normal draw (optionally scaled/shifted in float32), widened to float64 leaf."""
    t = torch.randn(*shape, dtype=torch.float32)
    if scale != 1.0:
        t = t * scale
    if shift != 0.0:
        t = t + shift
    return t.double().requires_grad_(True)


def uniform(*shape, bound):
    """float32 U(-bound, bound) draw, widened to a float64 leaf."""
    t = torch.empty(*shape, dtype=torch.float32).uniform_(-bound, bound)
    return t.double().requires_grad_(True)


def grad_like(t):
    """Upstream gradient: float32 normal of t's shape, widened to float64 (no grad)."""
    return torch.randn(tuple(t.shape), dtype=torch.float32).double()


def linear_params(out_f, in_f, bias=True):
    """nn.Linear-style init: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias."""
    bound = 1.0 / math.sqrt(in_f)
    w = uniform(out_f, in_f, bound=bound)
    b = uniform(out_f, bound=bound) if bias else None
    return w, b


def zero_grads(*ts):
    for t in ts:
        if t is not None and t.grad is not None:
            t.grad = None


def timm_attention(x, qkv_w, qkv_b, proj_w, proj_b, num_heads):
    Bx, Nx, Cx = x.shape
    hd = Cx // num_heads
    qkv = F.linear(x, qkv_w, qkv_b).reshape(Bx, Nx, 3, num_heads, hd).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    attn = (q @ k.transpose(-2, -1)) * (hd ** -0.5)
    attn = attn.softmax(dim=-1)
    y = (attn @ v).transpose(1, 2).reshape(Bx, Nx, Cx)
    return F.linear(y, proj_w, proj_b)


def timm_mlp(x, fc1_w, fc1_b, fc2_w, fc2_b):
    return F.linear(F.gelu(F.linear(x, fc1_w, fc1_b)), fc2_w, fc2_b)
