#!/usr/bin/env python3
"""Does fine-tuning pay? `vit train --init` against training from scratch on a few labels.

For each direction (a model pretrained on Fashion-MNIST fine-tuned on a few MNIST digits, and a
model pretrained on the digits fine-tuned on a few Fashion-MNIST images), each label count N and
each seed, four runs on the same N labelled images, all with the same model shape, batch and
number of steps (so the same arithmetic and about the same wall time; the wall time of each is
reported):

  scratch    `vit train --preset P --data SUBSET --steps S` (the preset's recipe, lr 2e-3)
  fine-tune  `vit train --init PRETRAINED --data SUBSET --steps S --lr 5e-4 --layer-decay 0.75`
  probe      the same with `--freeze backbone --lr 5e-3` (a linear probe: only the head trains)

evaluated on the full test split of the target (2,000 held-out digits of data/mnist; the 10,000
Fashion-MNIST test images), final weights. The subset is a seeded draw of N training images
(the same draw for every method of a seed), repeated to ~6,400 images a file so that the runs
evaluate every ~100 steps. Prints a Markdown table (mean and the three seeds).

    /usr/bin/python3 tools/recipes/transfer_table.py --vit build/vit --fashion-model runs/fashion/last.safetensors \
        --digits-model runs/digits_pre/last.safetensors --work /tmp/transfer
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np


def read_idx(path):
    with open(path, "rb") as f:
        raw = f.read()
    magic = int.from_bytes(raw[:4], "big")
    dims = magic & 0xFF
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw[4 + 4 * dims:], dtype=np.uint8).reshape(shape)


def write_idx(path, array):
    dims = array.ndim
    header = (0x0800 | dims).to_bytes(4, "big") + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    with open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def find(folder, stem):
    for name in (stem, stem + ".gz"):
        p = os.path.join(folder, name)
        if os.path.exists(p):
            return p
    raise SystemExit("%s: no %s" % (folder, stem))


def load_split(folder, split):
    import gzip
    out = []
    for kind in ("images-idx3", "labels-idx1"):
        p = find(folder, "%s-%s-ubyte" % (split, kind))
        if p.endswith(".gz"):
            tmp = p[:-3] + ".raw"
            with gzip.open(p, "rb") as f, open(tmp, "wb") as g:
                g.write(f.read())
            out.append(read_idx(tmp))
            os.remove(tmp)
        else:
            out.append(read_idx(p))
    return out


def make_subset(src, dst, n, seed, epoch_images=6400):
    """N training images (a seeded draw), repeated to about `epoch_images` a file so that an epoch
    (and its evaluation) comes every ~100 steps rather than every one or two (the augmentation
    draws anew for each copy: the same as more epochs), + the whole test split."""
    images, labels = load_split(src, "train")
    rng = np.random.default_rng(1000 + seed)
    order = rng.permutation(len(labels))
    pick = list(order[:n]) * max(1, -(-epoch_images // n))
    os.makedirs(dst, exist_ok=True)
    write_idx(os.path.join(dst, "train-images-idx3-ubyte"), images[pick])
    write_idx(os.path.join(dst, "train-labels-idx1-ubyte"), labels[pick])
    test_images, test_labels = load_split(src, "t10k")
    write_idx(os.path.join(dst, "t10k-images-idx3-ubyte"), test_images)
    write_idx(os.path.join(dst, "t10k-labels-idx1-ubyte"), test_labels)
    if os.path.exists(os.path.join(src, "classes.txt")):
        shutil.copy(os.path.join(src, "classes.txt"), os.path.join(dst, "classes.txt"))


def run(vit, args):
    t0 = time.time()
    p = subprocess.run([vit, "train", "--plain"] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seconds = time.time() - t0
    if p.returncode != 0:
        sys.stderr.write(p.stdout)
        raise SystemExit("vit train %s failed" % " ".join(args))
    m = re.search(r"done: test accuracy ([0-9.]+)%", p.stdout)
    speeds = [float(x) for x in re.findall(r" ([0-9]+) img/s", p.stdout)]
    return float(m.group(1)), seconds, (sum(speeds) / len(speeds) if speeds else float("nan"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vit", default="build/vit")
    ap.add_argument("--fashion-model", required=True,
                    help="a vit_fashion run's checkpoint (pretrained on Fashion-MNIST)")
    ap.add_argument("--digits-model", required=True, help="a run's checkpoint pretrained on the digits")
    ap.add_argument("--work", default="/tmp/transfer")
    ap.add_argument("--counts", default="100,500,1000")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    # The same augmentation for every method (the vit_fashion recipe's crop and flip are turned off
    # for digits, whose mirror images are other shapes).
    digits_aug = ["--rotate", "8", "--translate", "0.08", "--scale-min", "0.92", "--scale-max", "1.08",
                  "--hflip=false", "--crop-padding", "0"]
    fashion_aug = ["--crop-padding", "2", "--hflip"]
    directions = [
        ("Fashion-MNIST -> digits", a.fashion_model, "data/mnist", "vit_fashion", digits_aug),
        ("digits -> Fashion-MNIST", a.digits_model, "data/fashion-mnist", "vit_fashion", fashion_aug),
    ]
    rows = []
    for title, pretrained, data, preset, aug in directions:
        for n in [int(x) for x in a.counts.split(",")]:
            results = {"scratch": [], "fine-tune": [], "probe": []}
            seconds = {"scratch": [], "fine-tune": [], "probe": []}
            speed = {"scratch": [], "fine-tune": [], "probe": []}
            for seed in [int(x) for x in a.seeds.split(",")]:
                subset = os.path.join(a.work, "%s_%d_%d" % (os.path.basename(data), n, seed))
                make_subset(data, subset, n, seed)
                common = ["--data", subset, "--steps", str(a.steps), "--batch-size", "64", "--seed", str(seed),
                          "--threads", str(a.threads), "--overwrite", "--ema", "0"] + aug
                runs = {
                    "scratch": ["--preset", preset, "--lr", "2e-3"],
                    "fine-tune": ["--init", pretrained, "--lr", "5e-4", "--layer-decay", "0.75"],
                    "probe": ["--init", pretrained, "--lr", "5e-3", "--freeze", "backbone"],
                }
                for method, extra in runs.items():
                    out = os.path.join(a.work, "run_%s_%d_%d_%s" % (os.path.basename(data), n, seed, method))
                    acc, secs, ips = run(a.vit, common + extra + ["--out", out])
                    results[method].append(acc)
                    seconds[method].append(secs)
                    speed[method].append(ips)
                    print("%s N=%d seed %d %s: %.2f%% in %.1f s (%.0f training images/s)" % (
                        title, n, seed, method, acc, secs, ips), flush=True)
            rows.append((title, n, results, seconds, speed))
    print()
    print("| direction | labels | scratch % | fine-tune % | linear probe % | wall s (scratch / fine-tune / probe) "
          "| training images/s (scratch / fine-tune / probe) |")
    print("|---|---|---|---|---|---|---|")

    def cell(v):
        return "**%.2f** (%s)" % (np.mean(v), " / ".join("%.2f" % x for x in v))

    for title, n, results, seconds, speed in rows:
        print("| %s | %d | %s | %s | %s | %.1f / %.1f / %.1f | %.0f / %.0f / %.0f |" % (
            title, n, cell(results["scratch"]), cell(results["fine-tune"]), cell(results["probe"]),
            np.mean(seconds["scratch"]), np.mean(seconds["fine-tune"]), np.mean(seconds["probe"]),
            np.mean(speed["scratch"]), np.mean(speed["fine-tune"]), np.mean(speed["probe"])))
    print(json.dumps([dict(direction=t, labels=n, results=r, seconds=s, images_per_s=v) for t, n, r, s, v in rows]))


if __name__ == "__main__":
    main()
