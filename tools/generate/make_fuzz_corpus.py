#!/usr/bin/env python3
"""Writes the seed corpus for the fuzz targets (tests/fuzz/corpus/<target>/seed_*).

Small valid files of every kind each reader accepts, plus a few hostile ones (huge declared
sizes, overlapping tensors, decompression bombs) so the fuzzer starts next to the edges.
Needs numpy and Pillow (Debian: python3-numpy python3-pil). Run from the repository root:
    python3 tools/generate/make_fuzz_corpus.py
Inputs the fuzzer finds later (crash_*, or interesting ones kept by scripts/fuzz.sh) live
beside these seeds and are never rewritten by this script.
"""
import gzip
import io
import json
import os
import struct
import zlib

import numpy as np
from PIL import Image

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tests", "fuzz",
                    "corpus")


def write(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed_" + name), "wb") as f:
        f.write(data)


def safetensors(entries, metadata=None, header_override=None):
    header, blobs, off = {}, b"", 0
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in entries:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        blobs += raw
        off += len(raw)
    if header_override is not None:
        header = header_override
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + blobs


def seeds_safetensors():
    f32 = np.arange(6, dtype="<f4").tobytes()
    write("safetensors", "f32.safetensors", safetensors([("w", "F32", [2, 3], f32)], {"format": "pt"}))
    write("safetensors", "mixed.safetensors", safetensors([
        ("a", "F16", [3], np.array([1, -2, 65504], dtype="<f2").tobytes()),
        ("b", "BF16", [2], b"\x80\x3f\x00\xc0"),
        ("c", "I64", [2], np.array([7, -1], dtype="<i8").tobytes()),
        ("d", "F64", [1], np.array([0.5], dtype="<f8").tobytes()),
        ("e", "I32", [2], np.array([3, 4], dtype="<i4").tobytes()),
        ("s", "F32", [], b"\x00\x00\x80\x3f"),
        ("z", "F32", [0, 4], b""),
    ]))
    write("safetensors", "int8.safetensors", safetensors([
        ("q", "I8", [3, 5], np.arange(-7, 8, dtype="<i1").tobytes()),   # 15 bytes: the next starts unaligned
        ("q_scale", "F32", [3], np.array([0.5, 1, 2], dtype="<f4").tobytes()),
        ("one", "I8", [1], b"\x80"),
    ], {"quantization": '{"scheme": "vit-int8-1", "tensors": ["q"]}'}))
    write("safetensors", "int8_short.safetensors", safetensors([], header_override={
        "q": {"dtype": "I8", "shape": [4, 4], "data_offsets": [0, 15]}}) + b"\0" * 15)
    write("safetensors", "overlap.safetensors", safetensors([], header_override={
        "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
        "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}) + b"\0" * 12)
    write("safetensors", "outside.safetensors", safetensors([], header_override={
        "a": {"dtype": "F32", "shape": [1000000], "data_offsets": [0, 4000000]}}))
    write("safetensors", "overflow.safetensors", safetensors([], header_override={
        "a": {"dtype": "F64", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}}) + b"\0" * 8)
    write("safetensors", "huge_header.safetensors", struct.pack("<Q", 1 << 40) + b"{}")


def npy(descr, shape, data, version=1, fortran=False):
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)
    lead = 10 if version == 1 else 12
    header += " " * ((64 - (lead + len(header) + 1) % 64) % 64) + "\n"
    h = header.encode()
    size = struct.pack("<H", len(h)) if version == 1 else struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes([version, 0]) + size + h + data


def seeds_npy():
    buf = io.BytesIO()
    np.save(buf, np.arange(12, dtype=np.float32).reshape(3, 4))
    write("npy", "numpy_f4.npy", buf.getvalue())
    buf = io.BytesIO()
    np.save(buf, np.array(2.5))
    write("npy", "scalar_f8.npy", buf.getvalue())
    write("npy", "i8.npy", npy("<i8", "(2,)", np.array([1, -1], dtype="<i8").tobytes()))
    write("npy", "v2.npy", npy("<f4", "(1, 2)", b"\0" * 8, version=2))
    write("npy", "fortran.npy", npy("<f4", "(2, 2)", b"\0" * 16, fortran=True))
    write("npy", "overflow.npy", npy("<f8", "(3000000000, 1000000000)", b""))
    write("npy", "empty.npy", npy("<f4", "(0, 5)", b""))


def idx(images, labels, gz=False):
    n, rows, cols = images.shape
    img = struct.pack(">IIII", 0x803, n, rows, cols) + images.astype(np.uint8).tobytes()
    lab = struct.pack(">II", 0x801, n) + labels.astype(np.uint8).tobytes()
    if gz:
        img, lab = gzip.compress(img, mtime=0), gzip.compress(lab, mtime=0)
    return struct.pack("<H", len(lab)) + lab + img


def seeds_idx():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(3, 4, 5))
    write("idx", "raw", idx(images, np.array([0, 9, 3])))
    write("idx", "gzip", idx(images, np.array([1, 2, 3]), gz=True))
    write("idx", "bad_label", idx(images, np.array([1, 12, 3])))
    lab = struct.pack(">II", 0x801, 1) + b"\0"
    write("idx", "huge_count", struct.pack("<H", len(lab)) + lab + struct.pack(">IIII", 0x803, 0xffffffff, 4096, 4096))
    bomb = gzip.compress(b"\0" * (1 << 22), mtime=0)
    write("idx", "gzip_bomb", struct.pack("<H", len(lab)) + lab + bomb)


def seeds_cifar():
    rng = np.random.default_rng(1)

    def rec(label):
        return bytes([label]) + rng.integers(0, 256, size=3072, dtype=np.uint8).tobytes()

    write("cifar", "two.bin", rec(3) + rec(9))
    write("cifar", "bad_label.bin", rec(3) + rec(10))
    write("cifar", "short.bin", rec(1)[:-1])


def pil_bytes(image, fmt, **kw):
    buf = io.BytesIO()
    image.save(buf, fmt, **kw)
    return buf.getvalue()


def png_bomb(width, height):
    """A PNG that declares width x height (grey) with one tiny, mostly-missing IDAT."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


def seeds_image():
    rng = np.random.default_rng(2)
    rgb = Image.fromarray(rng.integers(0, 256, size=(9, 13, 3), dtype=np.uint8), "RGB")
    grey = Image.fromarray(rng.integers(0, 256, size=(28, 28), dtype=np.uint8), "L")
    rgba = Image.fromarray(rng.integers(0, 256, size=(5, 7, 4), dtype=np.uint8), "RGBA")
    write("image", "rgb.png", pil_bytes(rgb, "PNG"))
    write("image", "grey.png", pil_bytes(grey, "PNG"))
    write("image", "rgba.png", pil_bytes(rgba, "PNG"))
    write("image", "palette.png", pil_bytes(rgb.convert("P"), "PNG"))
    write("image", "bilevel.png", pil_bytes(grey.convert("1"), "PNG"))
    write("image", "baseline.jpg", pil_bytes(rgb, "JPEG", quality=90))
    write("image", "progressive.jpg", pil_bytes(rgb, "JPEG", quality=75, progressive=True))
    write("image", "grey.jpg", pil_bytes(grey, "JPEG"))
    write("image", "rgb.bmp", pil_bytes(rgb, "BMP"))
    write("image", "anim.gif", pil_bytes(rgb.convert("P"), "GIF"))
    write("image", "rgb.tga", pil_bytes(rgb, "TGA"))
    write("image", "rgb.ppm", pil_bytes(rgb, "PPM"))
    write("image", "one_pixel.png", pil_bytes(Image.new("RGB", (1, 1), (255, 0, 0)), "PNG"))
    write("image", "tall.png", pil_bytes(Image.new("L", (1, 300), 7), "PNG"))
    write("image", "bomb.png", png_bomb(100000, 100000))
    write("image", "bomb_wide.png", png_bomb(1 << 30, 2))


if __name__ == "__main__":
    seeds_safetensors()
    seeds_npy()
    seeds_idx()
    seeds_cifar()
    seeds_image()
    for t in sorted(os.listdir(ROOT)):
        print(t, len(os.listdir(os.path.join(ROOT, t))), "seeds")
