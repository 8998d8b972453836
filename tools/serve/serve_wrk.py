#!/usr/bin/env python3
"""Load test of `vit serve` through the Open Inference Protocol with a real load generator: wrk.

Debian's `wrk` (apt install wrk) posts one binary-extension inference request over and over
(POST /v2/models/NAME/infer: a JSON header naming a (1, 3, 224, 224) FP32 input of
binary_data_size bytes, the raw tensor after it, Inference-Header-Content-Length set, the logits
asked for), from a Lua script this tool writes. For each server setting (no batching:
--max-batch 1; dynamic batching: --max-batch 32) and each connection count (default 1, 8, 64) it
runs wrk for --seconds (after a warm-up) and reports requests/s, p50 and p99 (wrk --latency), the
mean batch the server formed (from /metrics), and `vit bench`'s images/s for the same model at
that mean batch (rounded), so the serving overhead reads as throughput / bench rate. Then two
models served at once (two copies of the model, one wrk each, 32 connections each).

Without --checkpoint it writes a random-weight ViT-Ti/16 (tools/serve/serve_load.py's). The clients
share the machine with the server (wrk takes one core's share at most: its threads are few and
mostly idle on a CPU-bound server); compare the rows of one run.

    python3 tools/serve/serve_wrk.py --vit build/vit --threads 2 --seconds 10
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: lib, golden, ... import
from serve.serve_load import random_vit  # noqa: E402


class Server:
    def __init__(self, vit, models, flags):
        args = [vit, "serve", "--port", "0"]
        for name, path in models:
            args += ["--model", f"{name}={path}"]
        self.proc = subprocess.Popen(args + flags, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"on http://([\d.]+):(\d+)", line)
        if not m:
            self.proc.kill()
            sys.exit(f"vit serve did not start: {line}{self.proc.stdout.read()}")
        self.url = f"http://{m.group(1)}:{m.group(2)}"

    def metrics(self):
        return urllib.request.urlopen(self.url + "/metrics", timeout=30).read().decode()

    def mean_batch(self, model, before):
        text = self.metrics()

        def value(name):
            m = re.search(r"^" + re.escape(name) + r'\{model="' + re.escape(model) + r'"\} ([0-9.e+]+)$', text, re.M)
            return float(m.group(1)) if m else 0.0
        images, calls = value("vit_batch_size_sum"), value("vit_batch_size_count")
        return (images - before[0]) / max(1.0, calls - before[1]), (images, calls)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def write_request(tmp, shape):
    x = np.random.default_rng(1).standard_normal(shape).astype("<f4")
    header = json.dumps({"inputs": [{"name": "input", "shape": list(shape), "datatype": "FP32",
                                     "parameters": {"binary_data_size": x.nbytes}}],
                         "outputs": [{"name": "logits", "parameters": {"binary_data": True}}]}).encode()
    return post_script(tmp, "infer", header, header + x.tobytes())


def post_script(tmp, name, header, body):
    """A wrk Lua script posting `body` (a binary-extension request whose JSON is `header`)."""
    body_path = os.path.join(tmp, name + ".bin")
    with open(body_path, "wb") as f:
        f.write(body)
    lua = os.path.join(tmp, name + ".lua")
    with open(lua, "w") as f:
        f.write(f'''wrk.method = "POST"
wrk.headers["Content-Type"] = "application/octet-stream"
wrk.headers["Inference-Header-Content-Length"] = "{len(header)}"
local f = io.open("{body_path}", "rb")
wrk.body = f:read("*a")
f:close()
''')
    return lua


def wrk(url, lua, connections, seconds):
    threads = min(connections, 2)
    out = subprocess.run(["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{seconds}s", "--latency",
                          "--timeout", "60s", "-s", lua, url], capture_output=True, text=True, check=True).stdout

    def ms(label):
        m = re.search(r"^\s+" + re.escape(label) + r"\s+([0-9.]+)(us|ms|s)\s*$", out, re.M)
        if not m:
            return float("nan")
        return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
    rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    return {"requests_per_s": rps, "p50_ms": ms("50%"), "p99_ms": ms("99%"),
            "non_2xx": int(bad.group(1)) if bad else 0, "socket_errors": errors.group(1) if errors else ""}


def bench_rate(vit, checkpoint, batch, threads):
    out = subprocess.run([vit, "bench", "--checkpoint", checkpoint, "--batch", str(batch), "--iters", "10",
                          "--threads", str(threads), "--json"], capture_output=True, text=True, check=True).stdout
    j = json.loads(out[out.index("{"):])
    return float(j.get("images_per_s") or j.get("throughput") or batch * 1000.0 / j["median_ms"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vit", default="build/vit")
    ap.add_argument("--checkpoint", help="model to serve (default: a random ViT-Ti/16 at 224)")
    ap.add_argument("--connections", default="1,8,64")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="vit serve / vit bench --threads (0: all cores)")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = args.checkpoint or os.path.join(tmp, "vit_tiny_random.safetensors")
        if not args.checkpoint:
            random_vit(checkpoint, dim=192, depth=12)
        lua = write_request(tmp, (1, 3, 224, 224))
        common = ["--threads", str(args.threads), "--max-queue", "4096"]
        rates = {}
        for setting, flags in [("no batching", ["--max-batch", "1"]), ("batching", ["--max-batch", "32"])]:
            server = Server(args.vit, [("m", checkpoint)], common + flags)
            try:
                url = server.url + "/v2/models/m/infer"
                for c in [int(v) for v in args.connections.split(",")]:
                    wrk(url, lua, c, args.warmup)
                    _, before = server.mean_batch("m", (0.0, 0.0))
                    r = wrk(url, lua, c, args.seconds)
                    r["mean_batch"], _ = server.mean_batch("m", before)
                    r.update(setting=setting, connections=c)
                    rows.append(r)
                    print(json.dumps(r), flush=True)
            finally:
                server.stop()
        # Two models at once: one wrk per model, concurrently.
        server = Server(args.vit, [("a", checkpoint), ("b", checkpoint)], common + ["--max-batch", "32"])
        try:
            for name in ("a", "b"):
                wrk(server.url + f"/v2/models/{name}/infer", lua, 8, args.warmup)
            befores = {n: server.mean_batch(n, (0.0, 0.0))[1] for n in ("a", "b")}
            with ThreadPoolExecutor(2) as pool:
                futures = {n: pool.submit(wrk, server.url + f"/v2/models/{n}/infer", lua, 32, args.seconds)
                           for n in ("a", "b")}
                for n, fut in futures.items():
                    r = fut.result()
                    r["mean_batch"], _ = server.mean_batch(n, befores[n])
                    r.update(setting=f"two models: {n}", connections=32)
                    rows.append(r)
                    print(json.dumps(r), flush=True)
        finally:
            server.stop()
        for r in rows:
            b = max(1, round(r["mean_batch"]))
            if b not in rates:
                rates[b] = bench_rate(args.vit, checkpoint, b, args.threads)
            r["bench_images_per_s"] = rates[b]
    print("\n| setting | connections | requests/s | p50 (ms) | p99 (ms) | mean batch | vit bench at that batch "
          "(images/s) | requests/s / bench |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['setting']} | {r['connections']} | {r['requests_per_s']:.1f} | {r['p50_ms']:.1f} | "
              f"{r['p99_ms']:.1f} | {r['mean_batch']:.1f} | {r['bench_images_per_s']:.1f} | "
              f"{r['requests_per_s'] / r['bench_images_per_s']:.2f} |")
    if any(r["non_2xx"] or r["socket_errors"] for r in rows):
        sys.exit("some requests failed (see above)")


if __name__ == "__main__":
    main()
