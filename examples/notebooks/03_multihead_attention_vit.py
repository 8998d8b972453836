"""Seed 003 on vit: the notebook's multi-head self-attention (one full-width Linear per head for
q, k and v; the heads concatenated into Linear(h*D, D)), cat along each dim, reshape, repeat, and
the notebook's VisionTransformer assembled from them, finished; then trained a few steps on digits.

Run: PYTHONPATH=build/python /usr/bin/python3 examples/notebooks/03_multihead_attention_vit.py
"""
import vit
from vit import nn

import digits


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, hidden_dim, num_heads):
        super().__init__()
        self.hidden_dim, self.num_heads = hidden_dim, num_heads
        # One (D, D) Linear per head for each of q, k, v: plain lists of modules are found too.
        self.q_weights = [nn.Linear(hidden_dim, hidden_dim) for _ in range(num_heads)]
        self.k_weights = [nn.Linear(hidden_dim, hidden_dim) for _ in range(num_heads)]
        self.v_weights = [nn.Linear(hidden_dim, hidden_dim) for _ in range(num_heads)]
        self.softmax = nn.Softmax(dim=-1)  # each query's weights over the keys sum to 1
        self.linear = nn.Linear(num_heads * hidden_dim, hidden_dim)  # the heads side by side -> D

    def forward(self, X):  # (B, N, D)
        # Fix: the seed's loop never combined the heads or returned; each image's heads are
        # concatenated, projected, and the images stacked back into a batch.
        out = []
        for x in X:  # (N, D)
            heads = []
            for head in range(self.num_heads):
                q, k, v = self.q_weights[head](x), self.k_weights[head](x), self.v_weights[head](x)
                heads.append(self.softmax(q @ k.T / self.hidden_dim ** 0.5) @ v)  # (N, D)
            out.append(self.linear(vit.cat(heads, dim=-1)))  # (N, h*D) -> (N, D)
        return vit.stack(out)  # (B, N, D)


class VisionTransformer(nn.Module):
    def __init__(self, img_shape, patch_dims, hidden_dim, num_heads, out_dim, num_encoder_blocks=6):
        super().__init__()
        C, H, W = img_shape
        self.patch_dims = patch_dims
        self.patch_len = C * patch_dims[0] * patch_dims[1]
        self.num_patches = (H // patch_dims[0]) * (W // patch_dims[1])
        self.num_encoder_blocks = num_encoder_blocks
        self.linear_patching = nn.Linear(self.patch_len, hidden_dim)
        self.class_embedding = nn.Parameter(vit.rand(1, hidden_dim))
        self.positional_embedding = nn.Parameter(vit.rand(1 + self.num_patches, hidden_dim))
        tokens = 1 + self.num_patches
        self.transformer_1 = nn.Sequential(nn.LayerNorm([tokens, hidden_dim]),
                                           MultiHeadSelfAttention(hidden_dim, num_heads))
        # Fix: the seed wrote nn.LayerNorm(1 + num_patches, hidden_dim), which passes hidden_dim as eps.
        self.transformer_2 = nn.Sequential(nn.LayerNorm([tokens, hidden_dim]), nn.Linear(hidden_dim, hidden_dim))
        self.mlp_head = nn.Sequential(nn.Linear(hidden_dim, out_dim), nn.Tanh())

    # Fix: the seed's forward sat outside the class and used names the constructor never set.
    def forward(self, X):  # (B, C, H, W)
        B = X.size(0)
        ph, pw = self.patch_dims
        # Fix: X.reshape(B, num_patches, patch_len) mixes pixels of different patches; unfold cuts them.
        patches = X.unfold(2, ph, ph).unfold(3, pw, pw).permute(0, 2, 3, 1, 4, 5).reshape(B, self.num_patches,
                                                                                      self.patch_len)
        E = self.linear_patching(patches)  # (B, N, D)
        E = vit.cat([self.class_embedding.repeat(B, 1, 1), E], dim=1)  # (B, 1 + N, D)
        Z = E + self.positional_embedding.repeat(B, 1, 1)
        for _ in range(self.num_encoder_blocks):  # the same two layers each time, as in the seed
            res1 = self.transformer_1(Z)
            Z = self.transformer_2(res1 + Z)
        return self.mlp_head(Z[:, 0])  # the class token -> (B, out_dim), in [-1, 1] (tanh)


def main():
    vit.manual_seed(0)
    # cat: side by side along dim 1, one under the other along dim 0.
    a = vit.rand(3, 2)
    b_row = vit.cat((a, a), 1)
    b_col = vit.cat((a, a), 0)
    c = vit.rand(1, 4)
    tall = vit.rand(len(b_col), 1)
    print(a, b_row, b_col, vit.cat([c, b_row], dim=0), vit.cat([tall, b_col], dim=1), sep="\n")
    thick = vit.rand(3, 4, 5)
    print(vit.cat([thick, thick], dim=1).shape)  # (3, 8, 5)

    # reshape (one size may be -1) and repeat.
    print(vit.arange(4.).reshape(2, 2), vit.tensor([[0, 1], [2, 3]]).reshape(-1))
    long_torch = vit.arange(6.)
    print(vit.cat((long_torch, long_torch), 0).reshape(2, 3, 2))
    a = vit.rand(1, 4)
    print(a.repeat(5, 1, 1).shape)  # five copies of the (1, 4) row

    with vit.no_grad():
        X = vit.randn(2, 3, 32, 32)
        model = VisionTransformer((3, 32, 32), (8, 8), 24, 2, 10, num_encoder_blocks=2)
        print(model(X).shape)  # (2, 10)

    model = VisionTransformer((1, 28, 28), (7, 7), 32, 2, 10, num_encoder_blocks=2)
    print(len(model.parameters()), "parameter tensors")
    digits.train(model, model, steps=20, batch=16, lr=3e-3)


if __name__ == "__main__":
    main()
