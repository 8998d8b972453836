"""Seed 001 on vit: nn.Linear (weights, bias, shapes, the matmul it is), activations, Dropout in
train and eval, LayerNorm by hand and as a module; then a small MLP trained a few steps on digits.

Run: PYTHONPATH=build/python /usr/bin/python3 examples/notebooks/01_linear_activations_dropout.py
"""
import vit
from vit import nn

import digits

vit.manual_seed(0)
d_in, d_out, batch_dim = 3, 5, 4

# A Linear layer is a matrix product plus a bias: y = W x + b, W (out, in), b (out).
x = vit.randn(d_in)
layer = nn.Linear(d_in, d_out)
y = layer(x)
print(y.shape, y)
print(layer.weight, layer.weight.shape)
print(layer.bias, layer.bias.shape)
by_hand = vit.matmul(layer.weight, x) + layer.bias
print(by_hand)
assert (by_hand - y).numpy().__abs__().max() < 1e-6
X = vit.randn(batch_dim, d_in)  # a batch goes through the same way: (4, 3) -> (4, 5)
print(layer(X).shape)

# Activations.
z = vit.tensor([-2.0, -0.5, 0.0, 0.5, 2.0])
print("ReLU", nn.ReLU()(z))
print("GELU", nn.GELU()(z))
print("Tanh", nn.Tanh()(z))

# Dropout: in training, each value is zeroed with probability p and the others scaled by
# 1 / (1 - p), so the expected value is kept; in eval it does nothing.
dropout_layer = nn.Dropout(p=0.5)
x = vit.randn(d_in)
print(x, dropout_layer(x))
X = vit.randn(batch_dim, d_in)
print(dropout_layer(X))
dropout_layer.eval()
print(dropout_layer(X))  # unchanged

# LayerNorm by hand over the features of each row.
X = vit.randn(batch_dim, d_in)
mean = X.mean(dim=-1, keepdim=True)
# Fix: the seed normalises with X.var(), the sample variance (divides by N - 1); LayerNorm uses the
# population variance (divides by N) and adds eps inside the square root.
var = X.var(dim=-1, keepdim=True, unbiased=False)
X_norm = (X - mean) / (var + 1e-5).sqrt()
print(mean, var, X_norm)
engine = nn.LayerNorm(d_in, elementwise_affine=False)(X)
assert (X_norm - engine).numpy().__abs__().max() < 1e-5


class LayerNorm(nn.Module):
    """LayerNorm(emb_dim) with a learned scale and shift."""

    def __init__(self, emb_dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.scale = nn.Parameter(vit.ones(emb_dim))
        self.shift = nn.Parameter(vit.zeros(emb_dim))

    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True, unbiased=False)
        return self.scale * (x - mean) / (var + self.eps).sqrt() + self.shift


ln = LayerNorm(d_in)
print(ln(X).mean(-1), ln(X).var(-1, unbiased=False))  # 0 and ~1 per row


class MLP(nn.Module):
    """Flattened digits -> Linear -> GELU -> Dropout -> LayerNorm -> classes."""

    def __init__(self, hidden=64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(28 * 28, hidden), nn.GELU(), nn.Dropout(0.1), LayerNorm(hidden),
                                 nn.Linear(hidden, 10))

    def forward(self, images):
        return self.net(images.flatten(1))


model = MLP()
digits.train(model, model)
