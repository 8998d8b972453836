"""Seed 002 on vit: a toy model end to end. A 4x4 image, 2x2 patches, flattened, embedded by a
Linear (4 -> 8), position embeddings added, one self-attention head; then the same pipeline on
real digits (7x7 patches), trained a few steps.

Run: PYTHONPATH=build/python /usr/bin/python3 examples/notebooks/02_toy_model.py
"""
import vit
from vit import nn

import digits

vit.manual_seed(0)

# A 4x4 grey image holding 0..15.
img = vit.arange(16).reshape(4, 4).float()
print(img)

# 2x2 patches: unfold rows, then columns -> (2, 2, 2, 2): (patch row, patch col, pixel row, pixel col).
patches = img.unfold(0, 2, 2).unfold(1, 2, 2)
print(patches.shape)
print(patches)

# Each patch flattened to 4 values, patches in reading order -> (4, 4).
patches = patches.contiguous().view(-1, 2 * 2)
print(patches)

# Patch embedding: 4 values -> 8 features, random weights for now.
linear = nn.Linear(4, 8)
embedded = linear(patches)
print("Shape:", embedded.shape)
print(embedded)
print(linear.weight)
print(linear.bias)

# Learned position embeddings: one 8-vector per patch, zeros at the start.
pos_embed = nn.Parameter(vit.zeros(4, 8))
embedded_with_pos = embedded + pos_embed
print(embedded_with_pos.shape)

# One attention head: queries and keys of width d_k = 4, values of width 8.
d_model, d_k = 8, 4
W_q = nn.Linear(d_model, d_k, bias=False)
W_k = nn.Linear(d_model, d_k, bias=False)
W_v = nn.Linear(d_model, d_model, bias=False)
Q, K, V = W_q(embedded_with_pos), W_k(embedded_with_pos), W_v(embedded_with_pos)
scores = Q @ K.T / d_k ** 0.5  # (4, 4): how much each patch looks at each other
attn_weights = scores.softmax(dim=-1)
attn_output = attn_weights @ V  # (4, 8)
print(attn_output.shape)
print(attn_weights.sum(-1))  # each row sums to 1
print(attn_output)


class ToyModel(nn.Module):
    """The same steps on (B, 1, 28, 28) digits: 7x7 patches (16 of them), batched."""

    def __init__(self, patch=7, d_model=16, d_k=8):
        super().__init__()
        self.patch, self.d_k = patch, d_k
        self.embed = nn.Linear(patch * patch, d_model)
        self.pos_embed = nn.Parameter(vit.zeros((28 // patch) ** 2, d_model))
        self.W_q = nn.Linear(d_model, d_k, bias=False)
        self.W_k = nn.Linear(d_model, d_k, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.head = nn.Linear(d_model, 10)

    def forward(self, images):
        B = images.size(0)
        p = images.unfold(2, self.patch, self.patch).unfold(3, self.patch, self.patch)
        x = self.embed(p.reshape(B, -1, self.patch * self.patch)) + self.pos_embed  # (B, 16, d_model)
        Q, K, V = self.W_q(x), self.W_k(x), self.W_v(x)
        attention = (Q @ K.transpose(-2, -1) / self.d_k ** 0.5).softmax(dim=-1)  # (B, 16, 16)
        return self.head((attention @ V).mean(1))  # mean over patches -> (B, 10)


model = ToyModel()
digits.train(model, model, lr=3e-3)
