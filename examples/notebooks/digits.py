"""The digits every notebook script trains on: the MNIST IDX files scripts/setup.sh makes in
data/mnist (8,000 training digits), read with numpy and handed to vit as tensors. Only the reading
is numpy's; every computation on them is the engine's."""
import os
import struct

import numpy as np

import vit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _read_idx(path):
    with open(path, "rb") as f:
        data = f.read()
    dims = data[3]  # the magic number's last byte: how many dimensions
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(count=512):
    """The first `count` training digits as (images (count, 1, 28, 28) in [0, 1], labels)."""
    folder = os.environ.get("VIT_DIGITS", os.path.join(ROOT, "data", "mnist"))
    images = _read_idx(os.path.join(folder, "train-images-idx3-ubyte"))[:count]
    labels = _read_idx(os.path.join(folder, "train-labels-idx1-ubyte"))[:count]
    return images.astype(np.float32)[:, None] / 255.0, labels.astype(np.int64)


def train(model, to_logits, steps=30, batch=32, lr=1e-3, seed=0):
    """A few AdamW steps of cross-entropy on the digits; prints the loss going down and returns
    (first loss, last loss), each the mean over 5 steps."""
    images, labels = load()
    optimizer = vit.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    rng = np.random.default_rng(seed)
    losses = []
    for step in range(steps):
        pick = rng.choice(len(images), batch, replace=False)
        logits = to_logits(vit.tensor(images[pick]))
        loss = vit.nn.functional.cross_entropy(logits, labels[pick])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 10 == 0 or step == steps - 1:
            print(f"step {step:3d}  loss {loss.item():.4f}")
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < first, f"the loss did not go down: {first:.4f} over the first 5 steps, {last:.4f} over the last 5"
    print(f"loss: {first:.4f} over the first 5 steps, {last:.4f} over the last 5")
    return first, last
