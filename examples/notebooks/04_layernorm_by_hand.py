"""Seed 004 on vit: LayerNorm written out by hand over the last two dims of an (S, B, E) input,
step by step, then as a module; checked against the engine's own LayerNorm, then trained.

Run: PYTHONPATH=build/python /usr/bin/python3 examples/notebooks/04_layernorm_by_hand.py
"""
import vit
from vit import nn

import digits

# Two tokens of three features, one sentence: (B, S, E) = (1, 2, 3).
inputs = vit.tensor([[[.2, .1, .3], [.5, .1, .1]]])
print(inputs.size())
B, S, E = inputs.size()
# Fix: the seed moves to (S, B, E) with reshape(S, B, E), which is only right because B == 1;
# swapping the axes is a permute.
inputs = inputs.permute(1, 0, 2)
print(inputs, inputs.size())

# The normalised shape: the last two dims, (B, E); gamma and beta have that shape.
parameter_shape = inputs.size()[-2:]
gamma = nn.Parameter(vit.ones(parameter_shape))
beta = nn.Parameter(vit.zeros(parameter_shape))
dims = [-(i + 1) for i in range(len(parameter_shape))]  # [-1, -2]
print(parameter_shape, dims)

mean = inputs.mean(dims, keepdim=True)
print("mean", mean, mean.shape)
var = ((inputs - mean) ** 2).mean(dims, keepdim=True)  # population variance, as LayerNorm uses
print("var", var)
epsilon = 1e-5
std = (var + epsilon).sqrt()
print("std", std)
y = (inputs - mean) / std
print("y", y)
out = gamma * y + beta
print("out", out)


class LayerNormalization(nn.Module):
    """The same as a module. Fix: the seed's forward read the global `inputs`, not its argument."""

    def __init__(self, parameters_shape, eps=1e-5):
        super().__init__()
        self.parameters_shape = tuple(parameters_shape)
        self.eps = eps
        self.gamma = nn.Parameter(vit.ones(self.parameters_shape))
        self.beta = nn.Parameter(vit.zeros(self.parameters_shape))

    def forward(self, x):
        dims = [-(i + 1) for i in range(len(self.parameters_shape))]
        mean = x.mean(dims, keepdim=True)
        var = ((x - mean) ** 2).mean(dims, keepdim=True)
        std = (var + self.eps).sqrt()
        return self.gamma * ((x - mean) / std) + self.beta


vit.manual_seed(0)
sentences = vit.randn(5, 3, 8)  # (sentence_length, batch_size, embedding_dim)
by_hand = LayerNormalization(sentences.size()[-2:])(sentences)
engine = nn.LayerNorm(list(sentences.size()[-2:]))(sentences)  # the engine's fused op
gap = (by_hand - engine).numpy().__abs__().max()
print(f"by hand vs nn.LayerNorm: largest difference {gap:.2e}")
assert gap < 1e-5


# Trained: patches of a digit -> Linear -> this LayerNorm over (patches, features) -> mean -> classes.
class TinyModel(nn.Module):
    def __init__(self, patch=7, dim=32):
        super().__init__()
        self.patch = patch
        self.embed = nn.Linear(patch * patch, dim)
        self.norm = LayerNormalization(((28 // patch) ** 2, dim))
        self.head = nn.Linear(dim, 10)

    def forward(self, images):  # (B, 1, 28, 28)
        B = images.size(0)
        p = images.unfold(2, self.patch, self.patch).unfold(3, self.patch, self.patch)  # (B, 1, 4, 4, 7, 7)
        p = p.reshape(B, -1, self.patch * self.patch)  # (B, 16, 49)
        return self.head(self.norm(self.embed(p).relu()).mean(1))


model = TinyModel()
digits.train(model, model)
