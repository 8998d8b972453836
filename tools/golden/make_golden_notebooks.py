#!/usr/bin/env python3
"""PyTorch references for the seed notebooks' random-weight parts, as run on vit by
examples/notebooks/ (python/tests/test_notebooks.py compares; the tests need no PyTorch).

Requirements: Debian's python3-torch (1.13). Run with the system interpreter:
    /usr/bin/python3 tools/golden/make_golden_notebooks.py
Deterministic (torch.manual_seed, one thread). Writes tests/golden/notebooks/:
  mhsa.npz   the notebook's MultiHeadSelfAttention, finished as examples/notebooks/03 finishes it
             (per head: one Linear(D, D) each for q, k, v; softmax(q k^T / sqrt(D)) v; the heads
             concatenated into Linear(h*D, D); images stacked), D = 8, h = 2, input X (2, 5, 8).
             Keys: "param/<name>" for every parameter (the names a vit.nn.Module gives it:
             q_weights.0.weight, ..., linear.bias), "input", "weights_of_loss" R (2, 5, 8),
             "output", and the gradients of sum(output * R): "grad/input", "grad/<name>".
  vit.npz    the notebook's VisionTransformer as examples/notebooks/03 finishes it (unfolded
             patches, LayerNorm over (1 + N, D) in both sub-blocks, the two sub-blocks applied
             num_encoder_blocks = 2 times, tanh head), image (3, 16, 16), patch 8, D = 12, h = 2,
             10 outputs, input (2, 3, 16, 16); the same keys, R (2, 10).
"""
import os

import numpy as np
import torch
from torch import nn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "golden", "notebooks")


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, hidden_dim, num_heads):
        super().__init__()
        self.hidden_dim, self.num_heads = hidden_dim, num_heads
        self.q_weights = nn.ModuleList([nn.Linear(hidden_dim, hidden_dim) for _ in range(num_heads)])
        self.k_weights = nn.ModuleList([nn.Linear(hidden_dim, hidden_dim) for _ in range(num_heads)])
        self.v_weights = nn.ModuleList([nn.Linear(hidden_dim, hidden_dim) for _ in range(num_heads)])
        self.softmax = nn.Softmax(dim=-1)
        self.linear = nn.Linear(num_heads * hidden_dim, hidden_dim)

    def forward(self, X):
        out = []
        for x in X:
            heads = []
            for h in range(self.num_heads):
                q, k, v = self.q_weights[h](x), self.k_weights[h](x), self.v_weights[h](x)
                heads.append(self.softmax(q @ k.T / self.hidden_dim ** 0.5) @ v)
            out.append(self.linear(torch.cat(heads, dim=-1)))
        return torch.stack(out)


class VisionTransformer(nn.Module):
    def __init__(self, img_shape, patch_dims, hidden_dim, num_heads, out_dim, num_encoder_blocks=6):
        super().__init__()
        C, H, W = img_shape
        self.patch_dims = patch_dims
        self.patch_len = C * patch_dims[0] * patch_dims[1]
        self.num_patches = (H // patch_dims[0]) * (W // patch_dims[1])
        self.num_encoder_blocks = num_encoder_blocks
        self.linear_patching = nn.Linear(self.patch_len, hidden_dim)
        self.class_embedding = nn.Parameter(torch.rand(1, hidden_dim))
        self.positional_embedding = nn.Parameter(torch.rand(1 + self.num_patches, hidden_dim))
        tokens = 1 + self.num_patches
        self.transformer_1 = nn.Sequential(nn.LayerNorm([tokens, hidden_dim]),
                                           MultiHeadSelfAttention(hidden_dim, num_heads))
        self.transformer_2 = nn.Sequential(nn.LayerNorm([tokens, hidden_dim]), nn.Linear(hidden_dim, hidden_dim))
        self.mlp_head = nn.Sequential(nn.Linear(hidden_dim, out_dim), nn.Tanh())

    def forward(self, X):
        B = X.shape[0]
        ph, pw = self.patch_dims
        patches = X.unfold(2, ph, ph).unfold(3, pw, pw).permute(0, 2, 3, 1, 4, 5)
        patches = patches.reshape(B, self.num_patches, self.patch_len)
        E = self.linear_patching(patches)
        E = torch.cat([self.class_embedding.repeat(B, 1, 1), E], dim=1)
        Z = E + self.positional_embedding.repeat(B, 1, 1)
        for _ in range(self.num_encoder_blocks):
            res1 = self.transformer_1(Z)
            Z = self.transformer_2(res1 + Z)
        return self.mlp_head(Z[:, 0])


def randomise(model):
    """Weights away from their init (LayerNorms included), so every gradient path is exercised."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.randn_like(p) * (0.1 if name.endswith("bias") else 0.3) + (1.0 if ".0.weight" in name and
                    p.dim() == 2 and "transformer" in name else 0.0))


def record(model, x, name):
    x = x.clone().requires_grad_(True)
    out = model(x)
    r = torch.randn_like(out)
    (out * r).sum().backward()
    arrays = {"input": x.detach().numpy(), "weights_of_loss": r.numpy(), "output": out.detach().numpy(),
              "grad/input": x.grad.numpy()}
    for n, p in model.named_parameters():
        arrays["param/" + n] = p.detach().numpy()
        arrays["grad/" + n] = p.grad.numpy()
    path = os.path.join(OUT, name)
    np.savez(path, **{k: np.ascontiguousarray(v, dtype=np.float32) for k, v in arrays.items()})
    print(f"wrote {path}: {len(arrays)} arrays, {os.path.getsize(path)} bytes")


def main():
    torch.set_num_threads(1)
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(35)
    mhsa = MultiHeadSelfAttention(8, 2)
    randomise(mhsa)
    record(mhsa, torch.randn(2, 5, 8), "mhsa.npz")
    torch.manual_seed(36)
    model = VisionTransformer((3, 16, 16), (8, 8), 12, 2, 10, num_encoder_blocks=2)
    randomise(model)
    record(model, torch.randn(2, 3, 16, 16), "vit.npz")


if __name__ == "__main__":
    main()
