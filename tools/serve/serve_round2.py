#!/usr/bin/env python3
"""The serving measurements of issue 44: images in, models swapped live, gRPC against HTTP.

    python3 tools/serve/serve_round2.py images  [--seconds 10]   # ViT-S/16: JPEG bytes vs the tensor
    python3 tools/serve/serve_round2.py reload  [--swaps 10]     # ViT-Ti/16 swapped under wrk -c 64
    python3 tools/serve/serve_round2.py grpc    [--seconds 10]   # ViT-Ti/16: gRPC vs HTTP binary, 64 clients

images: `vit serve` with a random-weight ViT-S/16 (224); Debian's wrk posts either the (1, 3, 224,
224) FP32 tensor (binary extension) or a JPEG's bytes as the BYTES input "image" (binary,
length-prefixed) to /v2/models/m/infer, at 1 and 64 connections. The decode + preprocess cost per
image is the difference of the server's own mean request time (vit_request_duration_seconds) at
one connection between the two.

reload: `vit serve --model-control poll --repository-poll-secs 1` on a directory holding m.safetensors
(ViT-Ti/16, weights A); first wrk at 64 connections without swaps, as long as the swap run (the
reference memory of one model after this load); then wrk at 64 connections posts tensors to m for
the whole run while the file is replaced (written beside it, renamed in) by weights B, A, B, ...
--swaps times, each once the previous version serves; two checker threads compare every answer
they get with A's and B's logits (within 1e-4 of the largest). Reports wrk's non-2xx and socket
errors, the checkers' mismatches, and the server's resident memory: idle, after the load without
swaps, at its peak, and after the last swap.

grpc: one server with --grpc-port; 64 connections of wrk (HTTP binary) for --seconds, then 64
clients of build/vit_grpc_load (each its own HTTP/2 connection) for --seconds, the same (1, 3,
224, 224) FP32 tensor, logits back. For each: requests/s, p50/p99, and the server's CPU seconds
per request (from /proc/PID/stat) and the load generator's.

Clients share the machine with the server: compare rows of one run.
"""

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: lib, serve, ... import
from serve.serve_load import random_vit  # noqa: E402
from serve.serve_wrk import post_script as lua_for, wrk  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


class Server:
    def __init__(self, vit, flags):
        self.proc = subprocess.Popen([vit, "serve", "--port", "0"] + flags, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.lines = []
        self.grpc = None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                sys.exit("vit serve did not start:\n" + "".join(self.lines))
            self.lines.append(line)
            m = re.search(r"on http://([\d.]+):(\d+)", line)
            if m:
                self.url = f"http://{m.group(1)}:{m.group(2)}"
            g = re.search(r"gRPC on [\d.]+:(\d+)", line)
            if g:
                self.grpc = int(g.group(1))
            if line.startswith("  "):  # the model lines come last
                break
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    def cpu_seconds(self):
        fields = open(f"/proc/{self.proc.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK

    def rss_mb(self):
        text = open(f"/proc/{self.proc.pid}/status").read()
        return int(re.search(r"VmRSS:\s+(\d+)", text).group(1)) / 1024

    def get(self, path):
        return urllib.request.urlopen(self.url + path, timeout=60).read()

    def post(self, path, body=b"", headers=None):
        req = urllib.request.Request(self.url + path, data=body, headers=headers or {}, method="POST")
        return urllib.request.urlopen(req, timeout=60).read()

    def mean_seconds(self, model="m"):
        text = self.get("/metrics").decode()

        def value(name):
            m = re.search("^" + name + r'\{model="' + model + r'"\} ([0-9.e+]+)$', text, re.M)
            return float(m.group(1)) if m else 0.0
        return value("vit_request_duration_seconds_sum"), value("vit_request_duration_seconds_count")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def tensor_body(tmp, size=224):
    x = np.random.default_rng(1).standard_normal((1, 3, size, size)).astype("<f4")
    head = json.dumps({"inputs": [{"name": "input", "shape": [1, 3, size, size], "datatype": "FP32",
                                   "parameters": {"binary_data_size": x.nbytes}}],
                       "outputs": [{"name": "logits", "parameters": {"binary_data": True}}]}).encode()
    return head, head + x.tobytes(), x


def image_body(jpeg):
    element = len(jpeg).to_bytes(4, "little") + jpeg
    head = json.dumps({"inputs": [{"name": "image", "shape": [1], "datatype": "BYTES",
                                   "parameters": {"binary_data_size": len(element)}}],
                       "outputs": [{"name": "logits", "parameters": {"binary_data": True}}]}).encode()
    return head, head + element


def photo_jpeg(tmp, width=500, height=375, quality=90):
    """A photo-like JPEG (smooth shapes and noise), written with libjpeg-turbo's cjpeg."""
    rng = np.random.default_rng(7)
    yy, xx = np.mgrid[0:height, 0:width]
    img = np.stack([128 + 100 * np.sin(xx / 37.0 + c) * np.cos(yy / 23.0 - c) for c in range(3)], -1)
    img = np.clip(img + rng.normal(0, 12, img.shape), 0, 255).astype(np.uint8)
    ppm = os.path.join(tmp, "photo.ppm")
    with open(ppm, "wb") as f:
        f.write(b"P6\n%d %d\n255\n" % (width, height) + img.tobytes())
    return subprocess.run(["cjpeg", "-quality", str(quality), ppm], capture_output=True, check=True).stdout


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def images(args, tmp):
    ckpt = os.path.join(tmp, "vit_s16.safetensors")
    random_vit(ckpt, dim=384, depth=12)
    jpeg = photo_jpeg(tmp)
    t_head, t_body, _ = tensor_body(tmp)
    i_head, i_body = image_body(jpeg)
    luas = {"tensor": lua_for(tmp, "tensor", t_head, t_body), "JPEG": lua_for(tmp, "image", i_head, i_body)}
    server = Server(args.vit, ["--model", f"m={ckpt}", "--threads", str(args.threads), "--max-queue", "4096"])
    url = server.url + "/v2/models/m/infer"
    rows = []

    def idle():  # what an earlier wrk left queued is answered before the next row starts
        while re.search(r"^vit_inflight_requests (\d+)", server.get("/metrics").decode(), re.M).group(1) != "0":
            time.sleep(0.2)
    try:
        wrk(url, luas["JPEG"], 1, args.warmup)
        # One connection: tensor and JPEG rows alternate (--pairs times), so drift hits both alike.
        for _ in range(args.pairs):
            for kind in ("tensor", "JPEG"):
                idle()
                s0, n0 = server.mean_seconds()
                r = wrk(url, luas[kind], 1, args.seconds)
                s1, n1 = server.mean_seconds()
                r.update(input=kind, connections=1, server_ms=1000 * (s1 - s0) / max(1, n1 - n0))
                rows.append(r)
                print(json.dumps(r), flush=True)
        for kind in ("tensor", "JPEG"):
            idle()
            s0, n0 = server.mean_seconds()
            r = wrk(url, luas[kind], 64, 3 * args.seconds)
            s1, n1 = server.mean_seconds()
            r.update(input=kind, connections=64, server_ms=1000 * (s1 - s0) / max(1, n1 - n0))
            rows.append(r)
            print(json.dumps(r), flush=True)
    finally:
        server.stop()
    print(f"\nViT-S/16 224, a {len(jpeg)}-byte 500x375 JPEG (q90) vs the 602,112-byte tensor, "
          f"{args.seconds} s per 1-connection row, {3 * args.seconds} s per 64-connection row\n")
    print("| input | connections | requests/s | p50 (ms) | p99 (ms) | server time per request (ms) | non-2xx |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['input']} | {r['connections']} | {r['requests_per_s']:.1f} | {r['p50_ms']:.1f} | "
              f"{r['p99_ms']:.1f} | {r['server_ms']:.2f} | {r['non_2xx']} |")
    ones = [r for r in rows if r["connections"] == 1]
    diffs = sorted(b["server_ms"] - a["server_ms"] for a, b in zip(ones[0::2], ones[1::2]))
    base = sorted(a["server_ms"] for a in ones[0::2])[len(diffs) // 2]
    extra = diffs[len(diffs) // 2]
    print(f"\nJPEG minus tensor, server time at 1 connection, per pair: "
          f"{', '.join(f'{d:+.2f}' for d in diffs)} ms; median {extra:+.2f} ms = {100 * extra / base:+.1f}% of the "
          f"tensor request's {base:.1f} ms")


def reload(args, tmp):
    repo = os.path.join(tmp, "repo")
    os.makedirs(repo)
    a, b = os.path.join(tmp, "a.safetensors"), os.path.join(tmp, "b.safetensors")
    random_vit(a, dim=192, depth=12, seed=0)
    random_vit(b, dim=192, depth=12, seed=1)
    head, body, _ = tensor_body(tmp)
    json_head = json.loads(head)
    json_head["outputs"][0]["parameters"]["binary_data"] = False
    check_head = json.dumps(json_head).encode()
    check_body = check_head + body[len(head):]
    refs = {}
    for name, path in (("A", a), ("B", b)):
        s = Server(args.vit, ["--model", f"m={path}", "--threads", str(args.threads)])
        try:
            refs[name] = np.array(json.loads(s.post("/v2/models/m/infer", check_body, {
                "Inference-Header-Content-Length": str(len(check_head))}))["outputs"][0]["data"])
        finally:
            s.stop()

    def deploy(src):
        shutil.copyfile(src, os.path.join(repo, ".incoming"))
        os.rename(os.path.join(repo, ".incoming"), os.path.join(repo, "m.safetensors"))
    deploy(a)
    server = Server(args.vit, ["--model-dir", repo, "--model-control", "poll", "--repository-poll-secs", "1",
                               "--threads", str(args.threads), "--max-queue", "4096"])
    time.sleep(1)
    rss_one = server.rss_mb()
    lua = lua_for(tmp, "tensor", head, body)
    seconds = int(args.swaps * args.every + 8)
    # The reference: one model after the same load, as long, without swaps (its activation arena
    # grown to the batches the load forms, the allocator's caches of 64 workers).
    wrk(server.url + "/v2/models/m/infer", lua, 64, seconds)
    time.sleep(3)
    rss_loaded = server.rss_mb()
    result = {}
    wrk_thread = threading.Thread(target=lambda: result.update(wrk(server.url + "/v2/models/m/infer", lua, 64,
                                                                   seconds)))
    wrk_thread.start()
    stop = threading.Event()
    checked = {"answers": 0, "mismatch": 0, "failed": 0, "versions": set()}
    peak = [rss_one]

    def checker():
        while not stop.is_set():
            try:
                a_ = json.loads(server.post("/v2/models/m/infer", check_body, {
                    "Inference-Header-Content-Length": str(len(check_head))}))
            except Exception:
                checked["failed"] += 1
                continue
            got = np.array(a_["outputs"][0]["data"])
            v = int(a_["model_version"])
            want = refs["A" if v % 2 == 1 else "B"]
            checked["answers"] += 1
            checked["versions"].add(v)
            if np.abs(got - want).max() > 1e-4 * np.abs(want).max():
                checked["mismatch"] += 1
    checkers = [threading.Thread(target=checker) for _ in range(2)]
    for t in checkers:
        t.start()
    time.sleep(3)
    swap_seconds = []
    for i in range(args.swaps):
        start = time.time()
        deploy(b if i % 2 == 0 else a)
        want = str(i + 2)
        while True:
            index = json.loads(server.post("/v2/repository/index"))
            peak[0] = max(peak[0], server.rss_mb())
            if any(m["name"] == "m" and m.get("version") == want for m in index):
                break
            time.sleep(0.05)
        swap_seconds.append(time.time() - start)
        time.sleep(max(0.0, args.every - (time.time() - start)))
    wrk_thread.join()
    stop.set()
    for t in checkers:
        t.join()
    time.sleep(3)  # idle: the server trims its allocator within a second
    rss_after = server.rss_mb()
    server.stop()
    print(json.dumps({**result, "checked": {k: (sorted(v) if isinstance(v, set) else v) for k, v in checked.items()},
                      "swap_seconds": swap_seconds}), flush=True)
    print(f"\n{args.swaps} swaps of a ViT-Ti/16 under wrk -c 64 for {seconds} s (+2 checker threads):")
    print(f"- wrk: {result['requests_per_s']:.1f} requests/s, non-2xx {result['non_2xx']}, socket errors "
          f"'{result['socket_errors'] or 'none'}'")
    print(f"- checkers: {checked['answers']} answers, versions {sorted(checked['versions'])}, "
          f"{checked['mismatch']} equal to neither A nor B, {checked['failed']} failed")
    print(f"- a new version served {min(swap_seconds):.2f}-{max(swap_seconds):.2f} s after its file was renamed in "
          f"(poll every 1 s)")
    print(f"- resident memory: {rss_one:.0f} MB with one model idle, {rss_loaded:.0f} MB after {seconds} s of the same "
          f"load without swaps, peak {peak[0]:.0f} MB during the swaps, {rss_after:.0f} MB after the last swap")


def grpc_vs_http(args, tmp):
    ckpt = os.path.join(tmp, "vit_ti16.safetensors")
    random_vit(ckpt, dim=192, depth=12)
    head, body, _ = tensor_body(tmp)
    lua = lua_for(tmp, "tensor", head, body)
    server = Server(args.vit, ["--model", f"m={ckpt}", "--threads", str(args.threads), "--max-queue", "4096",
                               "--grpc-port", "0"])
    load = os.path.join(os.path.dirname(args.vit), "vit_grpc_load")
    rows = []
    try:
        for door in ("HTTP binary", "gRPC"):
            if door == "gRPC":
                run = lambda s: json.loads(subprocess.run(  # noqa: E731
                    [load, "--port", str(server.grpc), "--model", "m", "--concurrency", "64", "--seconds", str(s),
                     "--warmup", "0"], capture_output=True, text=True, check=True).stdout)
            else:
                run = lambda s: wrk(server.url + "/v2/models/m/infer", lua, 64, s)  # noqa: E731
            run(args.warmup)
            cpu0, client0 = server.cpu_seconds(), child_cpu()
            r = run(args.seconds)
            cpu1, client1 = server.cpu_seconds(), child_cpu()
            n = r["requests_per_s"] * args.seconds
            r.update(door=door, server_cpu_ms=1000 * (cpu1 - cpu0) / n, client_cpu_ms=1000 * (client1 - client0) / n,
                     server_cores=(cpu1 - cpu0) / args.seconds)
            rows.append(r)
            print(json.dumps(r), flush=True)
    finally:
        server.stop()
    print(f"\nViT-Ti/16 224 at batch 1, 64 concurrent clients, {args.seconds} s per row\n")
    print("| door | requests/s | p50 (ms) | p99 (ms) | server CPU per request (ms) | server cores busy | "
          "client CPU per request (ms) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['door']} | {r['requests_per_s']:.1f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | "
              f"{r['server_cpu_ms']:.2f} | {r['server_cores']:.2f} | {r['client_cpu_ms']:.2f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["images", "reload", "grpc"])
    ap.add_argument("--vit", default="build/vit")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--swaps", type=int, default=10)
    ap.add_argument("--pairs", type=int, default=3, help="images: tensor/JPEG row pairs at 1 connection")
    ap.add_argument("--every", type=float, default=3.0, help="reload: seconds between swaps")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        {"images": images, "reload": reload, "grpc": grpc_vs_http}[args.what](args, tmp)


if __name__ == "__main__":
    main()
