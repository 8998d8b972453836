"""The seed notebooks (../shared/seeds) on vit's engine door: where a seed prints its inputs and
outputs, the printed inputs go through vit and must give the printed outputs to the printed
precision (and print the same way); where a seed uses random weights, the notebook's modules as
examples/notebooks/ finish them are compared with PyTorch on the same weights, gradients included
(tests/golden/notebooks, made by tools/golden/make_golden_notebooks.py; no PyTorch needed here)."""
import importlib.util
import os

import numpy as np
import pytest

import vit
from vit import nn

GOLDEN = os.path.join(os.environ["VIT_GOLDEN_DIR"], "notebooks")
NOTEBOOKS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples",
                         "notebooks")


def close(t, printed, places=4):
    """Equal to a value printed with `places` decimals."""
    np.testing.assert_allclose(t.numpy(), np.array(printed, dtype=np.float64), rtol=0, atol=0.5 * 10 ** -places + 1e-7)


# ---- seed 002: the toy model ----

def test_toy_image_patches_and_embedding_as_printed():
    img = vit.arange(16).reshape(4, 4).float()
    assert repr(img) == ("tensor([[ 0.,  1.,  2.,  3.],\n        [ 4.,  5.,  6.,  7.],\n"
                         "        [ 8.,  9., 10., 11.],\n        [12., 13., 14., 15.]])")
    patches = img.unfold(0, 2, 2).unfold(1, 2, 2)
    assert patches.shape == (2, 2, 2, 2) and repr(patches.shape) == "vit.Size([2, 2, 2, 2])"
    close(patches, [[[[0, 1], [4, 5]], [[2, 3], [6, 7]]], [[[8, 9], [12, 13]], [[10, 11], [14, 15]]]], 0)
    flat = patches.contiguous().view(-1, 2 * 2)
    close(flat, [[0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, 13], [10, 11, 14, 15]], 0)
    # The seed's printed Linear(4, 8) weights and bias give its printed embedding.
    linear = nn.Linear(4, 8)
    linear.weight.copy_([[-0.0786, 0.0531, -0.0895, -0.3645], [-0.0107, -0.4378, -0.0383, -0.2474],
                         [0.4826, 0.4910, 0.1220, 0.4997], [0.3217, -0.4536, 0.2054, -0.2951],
                         [0.3103, 0.0790, -0.4601, 0.3250], [0.1173, 0.1120, -0.4532, -0.0544],
                         [-0.4349, -0.1241, 0.3976, 0.2434], [0.4765, -0.1958, 0.4708, -0.4802]])
    linear.bias.copy_([-0.2175, 0.0424, -0.4613, -0.1339, 0.4123, -0.3515, 0.4091, 0.4758])
    embedded = linear(flat)
    assert embedded.shape == (4, 8)
    # The printed weights are rounded to 4 places: through sums of up to 4 x 15 they move the
    # output by at most 4 x 15 x 5e-5 = 3e-3 from the seed's printed values.
    np.testing.assert_allclose(embedded.numpy(), [
        [-2.3452, -1.7857, 3.0163, -1.2413, 0.2759, -2.3244, 3.0924, -0.2377],
        [-3.3043, -3.2541, 6.2068, -1.6844, 0.7843, -2.8811, 3.2565, 0.3049],
        [-6.1814, -7.6593, 15.7786, -3.0138, 2.3094, -4.5511, 3.7487, 1.9329],
        [-7.1404, -9.1278, 18.9691, -3.4569, 2.8178, -5.1077, 3.9128, 2.4755]], atol=3e-3)
    assert embedded.grad_fn != "" and embedded.requires_grad
    pos_embed = nn.Parameter(vit.zeros(4, 8))
    assert (embedded + pos_embed).shape == (4, 8)


# ---- seed 003: cat, reshape, repeat ----

def test_cat_reshape_and_repeat_as_printed():
    a = vit.tensor([[0.7042, 0.9584], [0.4484, 0.1449], [0.9184, 0.3075]])
    b_row = vit.cat((a, a), 1)
    close(b_row, [[0.7042, 0.9584, 0.7042, 0.9584], [0.4484, 0.1449, 0.4484, 0.1449],
                  [0.9184, 0.3075, 0.9184, 0.3075]])
    b_col = vit.cat((a, a), 0)
    close(b_col, [[0.7042, 0.9584], [0.4484, 0.1449], [0.9184, 0.3075]] * 2)
    c = vit.tensor([[0.7249, 0.4882, 0.2836, 0.3267]])
    close(vit.cat([c, b_row], dim=0), [[0.7249, 0.4882, 0.2836, 0.3267], [0.7042, 0.9584, 0.7042, 0.9584],
                                       [0.4484, 0.1449, 0.4484, 0.1449], [0.9184, 0.3075, 0.9184, 0.3075]])
    tall = vit.tensor([[0.5927], [0.1613], [0.4558], [0.3440], [0.0862], [0.5543]])
    close(vit.cat([tall, b_col], dim=1), [[0.5927, 0.7042, 0.9584], [0.1613, 0.4484, 0.1449],
                                          [0.4558, 0.9184, 0.3075], [0.3440, 0.7042, 0.9584],
                                          [0.0862, 0.4484, 0.1449], [0.5543, 0.9184, 0.3075]])
    assert repr(vit.arange(4.)) == "tensor([0., 1., 2., 3.])"
    assert repr(vit.arange(4.).reshape(2, 2)) == "tensor([[0., 1.],\n        [2., 3.]])"
    assert vit.tensor([[0, 1], [2, 3]]).reshape(-1).shape == (4,)
    long_torch = vit.arange(6.)
    doubled = vit.cat((long_torch, long_torch), 0)
    assert repr(doubled) == "tensor([0., 1., 2., 3., 4., 5., 0., 1., 2., 3., 4., 5.])"
    close(doubled.reshape(2, 3, 2), [[[0, 1], [2, 3], [4, 5]]] * 2, 0)
    row = vit.tensor([[0.7483, 0.6398, 0.8531, 0.3351]])
    repeated = row.repeat(5, 1, 1)
    assert repeated.shape == (5, 1, 4)
    close(repeated, [[[0.7483, 0.6398, 0.8531, 0.3351]]] * 5)
    thick = vit.rand(3, 4, 5)
    assert vit.cat([thick, thick], dim=1).shape == (3, 8, 5)


# ---- seed 004: LayerNorm by hand ----

def test_layernorm_by_hand_as_printed():
    inputs = vit.tensor([[[.2, .1, .3], [.5, .1, .1]]])
    B, S, E = inputs.size()
    inputs = inputs.permute(1, 0, 2)  # (S, B, E) = (2, 1, 3)
    shape = inputs.size()[-2:]
    assert shape == (1, 3)
    dims = [-(i + 1) for i in range(len(shape))]
    mean = inputs.mean(dims, keepdim=True)
    assert mean.shape == (2, 1, 1)
    close(mean, [[[0.2000]], [[0.2333]]])
    var = ((inputs - mean) ** 2).mean(dims, keepdim=True)
    close(var, [[[0.0067]], [[0.0356]]])
    std = (var + 1e-5).sqrt()
    close(std, [[[0.0817]], [[0.1886]]])
    y = (inputs - mean) / std
    close(y, [[[0.0000, -1.2238, 1.2238]], [[1.4140, -0.7070, -0.7070]]])
    gamma, beta = nn.Parameter(vit.ones(shape)), nn.Parameter(vit.zeros(shape))
    assert repr(gamma) == "tensor([[1., 1., 1.]], requires_grad=True)"
    out = gamma * y + beta
    close(out, [[[0.0000, -1.2238, 1.2238]], [[1.4140, -0.7070, -0.7070]]])
    # The engine's LayerNorm over the same two dims gives the same.
    close(nn.LayerNorm([1, 3])(inputs), [[[0.0000, -1.2238, 1.2238]], [[1.4140, -0.7070, -0.7070]]])


# ---- seed 000: LayerNorm's statistics and parameters ----

def test_layernorm_statistics_and_parameter_counts_as_printed():
    x = vit.tensor([[0, 4.], [-1, 7], [3, 5]])
    assert repr(x.mean(-1)) == "tensor([2., 3., 4.])"
    assert repr(x.std(-1, unbiased=False)) == "tensor([2., 4., 1.])"
    plain = nn.LayerNorm(2, elementwise_affine=False)
    assert sum(p.numel() for p in plain.parameters() if p.requires_grad) == 0
    assert plain.weight is None and plain.bias is None
    y = plain(x)
    close(y.mean(-1), [0, 0, 0])
    close(y.std(-1, unbiased=False), [1, 1, 1])
    affine = nn.LayerNorm(2, elementwise_affine=True)
    assert sum(p.numel() for p in affine.parameters() if p.requires_grad) == 4
    assert repr(affine.weight) == "tensor([1., 1.], requires_grad=True)"
    assert "grad_fn=" in repr(affine(x).mean(-1))
    conv = nn.Conv2d(3, 6, kernel_size=4, stride=4)
    assert repr(conv) == "Conv2d(3, 6, kernel_size=(4, 4), stride=(4, 4))"
    assert conv(vit.randn(1, 3, 8, 8)).shape == (1, 6, 2, 2)


# ---- seed 001: LayerNorm statistics of a printed batch ----

def test_batch_statistics_as_printed():
    X = vit.tensor([[0.0213, -0.9436, -1.0795], [-0.0361, 1.1067, -0.6574], [1.0809, 0.1795, -0.6091],
                    [-1.0005, -1.0290, 1.0055]])
    # X itself is printed to 4 places, so its rounding (5e-5) carries into the results: the bounds
    # below are the printed precision plus that carried error.
    mean = X.mean(dim=-1, keepdim=True)
    np.testing.assert_allclose(mean.numpy(), [[-0.6673], [0.1378], [0.2171], [-0.3414]], atol=1e-4)
    var = X.var(dim=-1, keepdim=True)  # the seed's: the sample variance
    np.testing.assert_allclose(var.numpy(), [[0.3603], [0.8007], [0.7151], [1.3607]], atol=3e-4)
    np.testing.assert_allclose(((X - mean) / vit.sqrt(var)).numpy(),
                               [[1.1473, -0.4605, -0.6868], [-0.1943, 1.0829, -0.8886],
                                [1.0215, -0.0444, -0.9770], [-0.5651, -0.5895, 1.1546]], atol=5e-4)
    dropout = nn.Dropout(p=0.5)
    kept = dropout(vit.ones(1000)).numpy()
    assert set(np.unique(kept)) <= {0.0, 2.0} and 400 < (kept == 2).sum() < 600
    dropout.eval()
    np.testing.assert_array_equal(dropout(X).numpy(), X.numpy())


# ---- seed 003's modules with random weights, against PyTorch (forward and every gradient) ----

def notebook(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(NOTEBOOKS, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    import sys
    sys.path.insert(0, NOTEBOOKS)
    spec.loader.exec_module(module)
    return module


def against_golden(model, golden):
    ref = np.load(os.path.join(GOLDEN, golden))
    names = [n for n, _ in model.named_parameters()]
    assert sorted(names) == sorted(k[len("param/"):] for k in ref.files if k.startswith("param/"))
    for n, p in model.named_parameters():
        p.copy_(ref["param/" + n])
    x = vit.tensor(ref["input"], requires_grad=True)
    out = model(x)
    np.testing.assert_allclose(out.numpy(), ref["output"], atol=2e-5, rtol=1e-4)
    (out * vit.tensor(ref["weights_of_loss"])).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), ref["grad/input"], atol=2e-5, rtol=1e-4)
    for n, p in model.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), ref["grad/" + n], atol=2e-5, rtol=1e-4, err_msg=n)


def test_notebook_multi_head_attention_matches_pytorch():
    nb = notebook("03_multihead_attention_vit")
    against_golden(nb.MultiHeadSelfAttention(8, 2), "mhsa.npz")


def test_notebook_vision_transformer_matches_pytorch():
    nb = notebook("03_multihead_attention_vit")
    against_golden(nb.VisionTransformer((3, 16, 16), (8, 8), 12, 2, 10, num_encoder_blocks=2), "vit.npz")


# ---- the door itself: what a notebook writer gets wrong is a clear error ----

def test_mistakes_are_clear_errors():
    t = vit.arange(6.).reshape(2, 3)
    with pytest.raises(IndexError, match=r"index 2 is out of range for dimension 0 of size 2"):
        t[2]
    with pytest.raises(vit.Error, match=r"\[reshape\]"):
        t.reshape(4, 2)
    with pytest.raises(vit.Error, match=r"\[index\] indices are integers and slices"):
        t["a"]
    with pytest.raises(vit.Error, match=r"\[copy_\] source \(3,\) but the tensor is \(2, 3\)"):
        t.copy_([1, 2, 3])
    with pytest.raises(vit.Error, match=r"only `.grad = None`"):
        t.grad = 1
    assert [row.tolist() for row in t] == [[0, 1, 2], [3, 4, 5]]
    assert t[:, 1:].tolist() == [[1, 2], [4, 5]] and t[-1, ::2].tolist() == [3, 5]
    with vit.no_grad():
        w = nn.Parameter(vit.ones(2))
        assert not (w * 2).requires_grad


def test_the_librarys_layers_and_optimisers_through_the_door():
    vit.manual_seed(0)
    model = nn.VisionTransformer("vit_notebook")
    names = [n for n, _ in model.named_parameters()]
    assert names[:3] == ["cls_token", "pos_embed", "patch_embed.proj.weight"]
    assert model(vit.randn(2, 1, 28, 28)).shape == (2, 10)
    assert nn.EncoderBlock(16, 2)(vit.randn(2, 5, 16)).shape == (2, 5, 16)
    assert nn.PatchEmbed(8, 4, 3, 6)(vit.randn(1, 3, 8, 8)).shape == (1, 4, 6)
    assert nn.MultiHeadSelfAttention(16, 4)(vit.randn(2, 5, 16)).shape == (2, 5, 16)
    w = nn.Parameter(vit.ones(3))
    sgd = vit.optim.SGD([w], lr=0.5)
    (w * vit.tensor([1., 2., 3.])).sum().backward()
    sgd.step()  # w - lr * grad
    np.testing.assert_allclose(w.numpy(), [0.5, 0.0, -0.5])
    sgd.zero_grad()
    assert w.grad is None or not w.grad.numpy().any()  # cleared


def test_the_jupyter_notebooks_are_made_from_the_scripts():
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(NOTEBOOKS), "..", "tools", "generate"))
    import make_notebooks
    import glob
    scripts = sorted(glob.glob(os.path.join(NOTEBOOKS, "0*.py")))
    assert len(scripts) == 5
    for script in scripts:
        with open(script[:-3] + ".ipynb") as f:
            assert f.read() == make_notebooks.text_of(script), (
                f"{script[:-3]}.ipynb is out of date: run python3 tools/generate/make_notebooks.py")
