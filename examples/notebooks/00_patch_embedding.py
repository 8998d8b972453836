"""Seed 000 on vit: patch embedding on an 8x8 RGB toy image (a Conv2d whose stride is the patch,
and the same by hand: unfold + matmul), LayerNorm with and without parameters, autograd's
grad_fn; then a patch-embedding classifier trained a few steps on digits.

Run: PYTHONPATH=build/python /usr/bin/python3 examples/notebooks/00_patch_embedding.py
"""
import vit
from vit import nn

import digits

vit.manual_seed(0)
n_samples, in_channels, img_size, patch_size, embed_dim = 1, 3, 8, 4, 6
x = vit.randn(n_samples, in_channels, img_size, img_size)  # (1, 3, 8, 8)

patch_embedding = nn.Conv2d(in_channels, embed_dim, kernel_size=patch_size, stride=patch_size)
print(patch_embedding)
x_proj = patch_embedding(x)
print(x_proj.shape)  # (1, 6, 2, 2): a 2x2 grid of 6-feature patches
x_flatten = x_proj.flatten(2)  # (1, 6, 4): the grid as a sequence
print(x_flatten.shape)
tokens = x_flatten.transpose(1, 2)  # (1, 4, 6): one row per patch
print(tokens)

# The same by hand: cut 4x4 patches, flatten each (channels, rows, cols), multiply by the
# convolution's weights seen as a (6, 48) matrix, add the bias.
p = x.unfold(2, patch_size, patch_size).unfold(3, patch_size, patch_size)  # (1, 3, 2, 2, 4, 4)
p = p.permute(0, 2, 3, 1, 4, 5).reshape(n_samples, 4, in_channels * patch_size * patch_size)  # (1, 4, 48)
w = patch_embedding.weight.reshape(embed_dim, -1)  # (6, 48)
by_hand = p @ w.T + patch_embedding.bias
gap = (by_hand - tokens).numpy().__abs__().max()
print(f"unfold + matmul vs Conv2d: largest difference {gap:.2e}")
assert gap < 1e-5

# LayerNorm: without learned parameters it only normalises each row.
input = vit.tensor([[0, 4.], [-1, 7], [3, 5]])
n_samples, n_features = input.shape
layernorm = nn.LayerNorm(n_features, elementwise_affine=False)
print(sum(p.numel() for p in layernorm.parameters() if p.requires_grad))  # 0
print(layernorm.weight, layernorm.bias)  # None None
print(input.mean(-1))  # tensor([2., 3., 4.])
print(input.std(-1, unbiased=False))  # population std: tensor([2., 4., 1.])
print(layernorm(input).mean(-1), layernorm(input).std(-1, unbiased=False))  # 0 and 1 per row
layernorm2 = nn.LayerNorm(n_features, elementwise_affine=True)
print(sum(p.numel() for p in layernorm2.parameters() if p.requires_grad))  # 4: weight and bias
print(layernorm2.weight, layernorm2.bias)
print(layernorm2(input).mean(-1), layernorm2(input).std(-1, unbiased=False))  # with grad_fn: in the graph

# Autograd: each result remembers the op that made it.
a = vit.tensor(2.0, requires_grad=True)
b = vit.tensor(1.0, requires_grad=True)
e = (a + b) * (b + 1)
e.backward()
print(e, e.grad_fn, a.grad, b.grad)  # de/da = b + 1 = 2, de/db = (a + b) + (b + 1) = 5


class PatchClassifier(nn.Module):
    """Conv2d patch embedding (7x7 patches of a digit) -> LayerNorm -> mean over patches -> classes."""

    def __init__(self, dim=32):
        super().__init__()
        self.patch_embedding = nn.Conv2d(1, dim, kernel_size=7, stride=7)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 10)

    def forward(self, images):
        tokens = self.patch_embedding(images).flatten(2).transpose(1, 2)  # (B, 16, dim)
        return self.head(self.norm(tokens).mean(1))


model = PatchClassifier()
digits.train(model, model, lr=3e-3)
