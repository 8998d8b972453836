#!/usr/bin/env python3
"""Load test for `vit serve`: throughput and latency with and without dynamic batching.

For each server setting (no batching: --max-batch 1; dynamic batching: --max-batch 32 with each
--max-delay-us given, default 0 and 2000) it starts `vit serve` on a free loopback port, then at
each concurrency (default 1, 8, 32) runs that many client threads, each sending POST /v1/predict
requests back to back (one image per request, as a float32 (1, C, H, W) .npy body, or an image
file with --image) for --seconds, after a short warm-up. It reports requests/s, p50/p99 latency
and the mean batch the server formed (from its /metrics), as a Markdown table.

Without --checkpoint it writes a random-weight ViT-Ti/16 at 224x224 (timm layout, 5.7 M
parameters; --model small: ViT-S/16, 22 M) to a temporary directory. The clients share the
machine with the server: on a 2-core machine they take part of the CPU (stdlib http.client, one
thread each), so absolute numbers are a floor; compare the rows of one run.

Standard library + numpy only (Debian python3-numpy). Example:
    python3 tools/serve/serve_load.py --vit build/vit --threads 2 --seconds 10
"""

import argparse
import http.client
import json
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for b in blobs:
            f.write(b)


def random_vit(path, dim, depth, image=224, patch=16, classes=1000, seed=0):
    """A timm-layout ViT with random weights (the load, not the answers, is what is measured)."""
    rng = np.random.default_rng(seed)
    tokens = (image // patch) ** 2 + 1
    w = lambda *shape: rng.standard_normal(shape).astype(np.float32) * 0.02  # noqa: E731
    t = {"cls_token": w(1, 1, dim), "pos_embed": w(1, tokens, dim),
         "patch_embed.proj.weight": w(dim, 3, patch, patch), "patch_embed.proj.bias": w(dim),
         "norm.weight": np.ones(dim), "norm.bias": np.zeros(dim), "head.weight": w(classes, dim),
         "head.bias": np.zeros(classes)}
    for i in range(depth):
        p = f"blocks.{i}."
        t.update({p + "norm1.weight": np.ones(dim), p + "norm1.bias": np.zeros(dim),
                  p + "attn.qkv.weight": w(3 * dim, dim), p + "attn.qkv.bias": w(3 * dim),
                  p + "attn.proj.weight": w(dim, dim), p + "attn.proj.bias": w(dim),
                  p + "norm2.weight": np.ones(dim), p + "norm2.bias": np.zeros(dim),
                  p + "mlp.fc1.weight": w(4 * dim, dim), p + "mlp.fc1.bias": w(4 * dim),
                  p + "mlp.fc2.weight": w(dim, 4 * dim), p + "mlp.fc2.bias": w(dim)})
    write_safetensors(path, t)


def npy_bytes(array):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % (tuple(array.shape),)
    header += " " * (-(10 + len(header) + 1) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + array.astype("<f4").tobytes()


class Server:
    def __init__(self, vit, checkpoint, flags):
        self.proc = subprocess.Popen([vit, "serve", "--checkpoint", checkpoint, "--port", "0", *flags],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"on http://([\d.]+):(\d+)", line)
        if not m:
            self.proc.kill()
            sys.exit(f"vit serve did not start: {line}{self.proc.stdout.read()}")
        self.host, self.port = m.group(1), int(m.group(2))
        self.first_line = line.strip()

    def get(self, path):
        c = http.client.HTTPConnection(self.host, self.port, timeout=60)
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode()

    def metric(self, name):
        _, text = self.get("/metrics")
        m = re.search(r"^" + re.escape(name) + r'(?:\{model="[^"]*"\})? ([0-9.e+]+)$', text, re.M)
        return float(m.group(1)) if m else 0.0

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def run_level(server, body, content_type, concurrency, seconds, warmup):
    latencies, errors, lock = [], [], threading.Lock()
    start_at = time.monotonic() + warmup
    stop_at = start_at + seconds

    def client():
        conn = http.client.HTTPConnection(server.host, server.port, timeout=120)
        mine, bad = [], []
        while True:
            t0 = time.monotonic()
            if t0 >= stop_at:
                break
            try:
                conn.request("POST", "/v1/predict", body=body, headers={"Content-Type": content_type})
                r = conn.getresponse()
                r.read()
                status = r.status
            except (OSError, http.client.HTTPException) as e:
                bad.append(repr(e))
                conn.close()
                conn = http.client.HTTPConnection(server.host, server.port, timeout=120)
                continue
            t1 = time.monotonic()
            if status != 200:
                bad.append(status)
            elif t0 >= start_at:  # the warm-up's requests are not counted
                mine.append(t1 - t0)
        conn.close()
        with lock:
            latencies.extend(mine)
            errors.extend(bad)

    calls0, images0 = server.metric("vit_batch_size_count"), server.metric("vit_batch_size_sum")
    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    calls = server.metric("vit_batch_size_count") - calls0
    images = server.metric("vit_batch_size_sum") - images0
    lat = np.sort(np.array(latencies)) * 1000.0
    return {
        "requests_per_s": len(lat) / seconds,
        "p50_ms": float(np.percentile(lat, 50)) if len(lat) else float("nan"),
        "p99_ms": float(np.percentile(lat, 99)) if len(lat) else float("nan"),
        "mean_batch": images / calls if calls else 0.0,
        "answered": len(lat),
        "errors": errors[:5],
        "error_count": len(errors),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vit", default="build/vit")
    ap.add_argument("--checkpoint", help="model to serve (default: a random ViT, see --model)")
    ap.add_argument("--model", choices=["tiny", "small"], default="tiny", help="the random ViT: Ti/16 or S/16, 224")
    ap.add_argument("--heads", type=int, help="--heads for vit serve")
    ap.add_argument("--image", help="send this image file instead of a .npy tensor")
    ap.add_argument("--concurrency", default="1,8,32")
    ap.add_argument("--seconds", type=float, default=10.0, help="measured time per concurrency")
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--threads", type=int, default=0, help="vit serve --threads (0: all cores)")
    ap.add_argument("--max-batch", type=int, default=32, help="the batching setting's --max-batch")
    ap.add_argument("--max-delay-us", default="0,2000",
                    help="the batching settings' --max-delay-us, one setting per value")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = args.checkpoint
        if not checkpoint:
            checkpoint = os.path.join(tmp, f"vit_{args.model}_random.safetensors")
            dim = {"tiny": 192, "small": 384}[args.model]
            random_vit(checkpoint, dim=dim, depth=12)
        common = ["--threads", str(args.threads), "--max-queue", "4096"]
        if args.heads:
            common += ["--heads", str(args.heads)]
        settings = [("no batching", ["--max-batch", "1"])]
        for delay in args.max_delay_us.split(","):
            settings.append((f"batching, delay {int(delay)} us",
                             ["--max-batch", str(args.max_batch), "--max-delay-us", str(int(delay))]))
        levels = [int(c) for c in args.concurrency.split(",")]
        results = []
        for name, flags in settings:
            server = Server(args.vit, checkpoint, common + flags)
            print(f"# {name}: {server.first_line}", flush=True)
            if args.image:
                with open(args.image, "rb") as f:
                    body, ctype = f.read(), "application/octet-stream"
            else:
                _, info = server.get("/healthz")
                size = json.loads(info).get("image_size", 224)
                channels = json.loads(info).get("channels", 3)
                x = np.random.default_rng(1).standard_normal((1, channels, size, size)).astype(np.float32)
                body, ctype = npy_bytes(x), "application/x-npy"
            try:
                for c in levels:
                    r = run_level(server, body, ctype, c, args.seconds, args.warmup)
                    r.update(setting=name, concurrency=c)
                    results.append(r)
                    extra = f"  ({r['error_count']} errors: {r['errors']})" if r["error_count"] else ""
                    print(f"  concurrency {c:3d}: {r['requests_per_s']:8.1f} req/s  p50 {r['p50_ms']:8.1f} ms  "
                          f"p99 {r['p99_ms']:8.1f} ms  mean batch {r['mean_batch']:5.1f}{extra}", flush=True)
            finally:
                server.stop()

    print("\n| setting | concurrency | requests/s | p50 (ms) | p99 (ms) | mean batch |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['setting']} | {r['concurrency']} | {r['requests_per_s']:.1f} | {r['p50_ms']:.1f} | "
              f"{r['p99_ms']:.1f} | {r['mean_batch']:.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if any(r["error_count"] for r in results):
        sys.exit("some requests failed (see above)")


if __name__ == "__main__":
    main()
