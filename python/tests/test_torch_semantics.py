"""The engine door answers as torch does where torch's words are used (vit.Tensor, vit.nn,
vit.optim): each test states torch's answer explicitly (no torch needed) and fails on a door that
silently answers otherwise."""
import numpy as np
import pytest

import vit
from vit import nn


# ---- in-place changes between forward and backward (torch's version counter) ----

def test_changing_a_saved_tensor_in_place_refuses_backward():
    w = vit.tensor([2.0, 3.0], requires_grad=True)
    x = vit.tensor([1.0, 1.0], requires_grad=True)
    loss = (w * x).sum()  # mul's gradient reads w and x
    version = w._version
    w.copy_([5.0, 7.0])  # torch: this raises at backward; the gradient at the new w would be wrong
    assert w._version == version + 1
    with pytest.raises(vit.Error, match=r"one of the variables needed for gradient computation has been modified "
                                        r"by an inplace operation: the \(2,\) tensor that mulBackward saved is at "
                                        r"version %d; expected version %d" % (version + 1, version)):
        loss.backward()
    assert w.grad is None and x.grad is None  # refused before any gradient was touched
    loss = (w * x).sum()  # the forward again, at the new values: fine
    loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 7.0])


def test_in_place_changes_that_no_gradient_reads_are_fine():
    w = vit.tensor([2.0, 3.0], requires_grad=True)
    loss = (w + 1.0).sum() + (w * 2.0).sum()  # + and * by a number read nothing of w
    w.copy_([0.0, 0.0])
    loss.backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 3.0])


def test_views_share_the_version_and_optimiser_steps_count():
    w = vit.tensor([1.0, 2.0, 3.0], requires_grad=True)
    head = w[0:2]
    loss = (head * head).sum()
    with vit.no_grad():
        w[2].copy_(0.0)  # another element of the same memory: refused, as torch does
    with pytest.raises(vit.Error, match="modified by an inplace operation"):
        loss.backward()
    q = vit.tensor([1.0, 2.0], requires_grad=True)
    opt = vit.optim.SGD([q], lr=0.1)
    (q * q).sum().backward()
    pending = (q * q).sum()
    opt.step()  # q changes in place under the pending graph
    with pytest.raises(vit.Error, match="modified by an inplace operation"):
        pending.backward()


def test_copying_into_a_tensor_that_gradients_flow_through_is_refused():
    w = vit.tensor([1.0, 2.0], requires_grad=True)
    y = w * 2.0
    with pytest.raises(vit.Error, match=r"\[copy_\] the tensor was made by mulBackward and gradients flow through it"):
        y.copy_([0.0, 0.0])
    with pytest.raises(vit.Error, match=r"\[copy_\] the tensor was made by selectBackward"):
        w[0].copy_(5.0)
    np.testing.assert_array_equal(w.numpy(), [1.0, 2.0])


# ---- weight decay (torch.optim decays every parameter it is given) ----

def test_weight_decay_reaches_one_dimensional_parameters_as_torch_optim():
    # One step from w = [1, 2] with gradient [1, -1], lr 0.1, weight_decay 0.5. torch:
    #   AdamW: w * (1 - lr * wd) - lr * m_hat / (sqrt(v_hat) + eps) = [0.95 - 0.1, 1.9 + 0.1] = [0.85, 2.0]
    #   SGD:   w - lr * (g + wd * w)                                = [1 - 0.15, 2 - 0.0]     = [0.85, 2.0]
    # A bias-like 1-D tensor decays as a 2-D weight does (the `vit train` convention of sparing
    # them is the trainer's).
    for make in (lambda ps: vit.optim.AdamW(ps, lr=0.1, weight_decay=0.5),
                 lambda ps: vit.optim.SGD(ps, lr=0.1, weight_decay=0.5)):
        bias = vit.tensor([1.0, 2.0], requires_grad=True)
        weight = vit.tensor([[1.0, 2.0]], requires_grad=True)
        slope = vit.tensor([1.0, -1.0])
        ((bias * slope).sum() + (weight * slope).sum()).backward()
        make([bias, weight]).step()
        np.testing.assert_allclose(bias.numpy(), [0.85, 2.0], rtol=1e-6)
        np.testing.assert_allclose(weight.numpy(), [[0.85, 2.0]], rtol=1e-6)


# ---- shared modules and parameters count once ----

class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(2, 2)
        self.decoder = self.encoder  # the same layer twice (tied weights)
        self.scale = nn.Parameter([1.0])
        self.scales = [self.scale]  # a parameter twice
        self.weight = self.encoder.weight  # another Python object for the encoder's weight

    def forward(self, x):
        return self.decoder(self.encoder(x)) * self.scales[0] * self.scale


def test_a_shared_module_or_parameter_is_listed_once_as_torch_does():
    m = Tied()
    assert [name for name, _ in m.named_parameters()] == ["encoder.weight", "encoder.bias", "scale"]
    assert len(m.parameters()) == 3 and [name for name, _ in m.named_children()] == ["encoder"]
    assert [name for name, _ in m.named_parameters(remove_duplicate=False)] == [
        "encoder.weight", "encoder.bias", "decoder.weight", "decoder.bias", "scale", "scales.0", "weight"]
    outer = nn.Sequential(m, m)
    assert len(outer.parameters()) == 3


def test_tied_parameters_are_stepped_once():
    m = Tied()
    loss = (m.scale * 1.0).sum() + (m.scales[0] * 1.0).sum()  # d/d scale = 2
    loss.backward()
    vit.optim.SGD(m.parameters(), lr=0.25).step()
    np.testing.assert_allclose(m.scale.numpy(), [0.5])  # 1 - 0.25 * 2 (twice would be 0)


def test_an_optimiser_refuses_a_tensor_given_twice():
    q = vit.tensor([1.0], requires_grad=True)
    for make in (vit.optim.SGD, vit.optim.AdamW):
        with pytest.raises(vit.Error, match=r"\[optimizer\] parameters 0 and 1 are the same tensor"):
            make([q, q], lr=0.1)
    with pytest.raises(vit.Error, match=r"\[optimizer\] parameters 0 and 2 are the same tensor"):
        lin = nn.Linear(2, 2)
        vit.optim.SGD([lin.weight, lin.bias, lin.weight], lr=0.1)  # two Python objects, one tensor


# ---- truth, comparisons, len ----

def test_truth_is_the_one_elements_and_ambiguous_otherwise():
    assert bool(vit.tensor(5.0)) is True and bool(vit.tensor(0.0)) is False
    assert bool(vit.tensor([0.0])) is False and bool(vit.tensor([[-2.0]])) is True
    assert bool(vit.tensor(float("nan"))) is True  # NaN != 0, as in torch
    with pytest.raises(vit.Error, match=r"\[bool\] Boolean value of Tensor with more than one value is ambiguous"):
        bool(vit.tensor([1.0, 1.0]))
    with pytest.raises(vit.Error, match=r"Boolean value of Tensor with no values is ambiguous \(shape \(0,\)\)"):
        bool(vit.zeros(0))
    if vit.tensor(0.0):
        raise AssertionError("if tensor(0.) took the true branch")


def test_comparisons_are_elementwise_tensors():
    a = vit.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = vit.tensor([1.0, 5.0, 3.0])
    assert isinstance(a == b, vit.Tensor)
    np.testing.assert_array_equal((a == b).numpy(), [[1, 0, 1], [0, 1, 0]])
    np.testing.assert_array_equal((a != b).numpy(), [[0, 1, 0], [1, 0, 1]])
    np.testing.assert_array_equal((a < b).numpy(), [[0, 1, 0], [0, 0, 0]])
    np.testing.assert_array_equal((a <= b).numpy(), [[1, 1, 1], [0, 1, 0]])
    np.testing.assert_array_equal((a > 2).numpy(), [[0, 0, 1], [1, 1, 1]])
    np.testing.assert_array_equal((2 >= a).numpy(), [[1, 1, 0], [0, 0, 0]])  # Python reflects to a <= 2
    c = a.clone()
    assert (a == c).sum().item() == 6  # equal values, not the same object
    assert (a == "x") is False and (a != None) is True  # noqa: E711 -- not numbers: not equal
    with pytest.raises(vit.Error, match=r"\[eq\]"):
        a == vit.tensor([1.0, 2.0])  # shapes that do not broadcast
    assert not (a == b).requires_grad
    # Tensors stay hashable by identity, as torch's.
    assert len({a, c, a}) == 2 and a in [a]


def test_len_and_iteration_of_a_0_d_tensor_are_type_errors():
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(vit.tensor(3.0))
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        list(vit.tensor(3.0))
    assert len(vit.zeros(3, 2)) == 3
    rows = list(vit.arange(6.0).reshape(3, 2))
    assert len(rows) == 3 and rows[2].tolist() == [4.0, 5.0]
    assert float(vit.tensor([2.5])) == 2.5 and int(vit.tensor(-2.7)) == -2


# ---- cross_entropy targets ----

LOGITS = [[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]]


def test_class_indices_that_are_not_whole_numbers_are_refused():
    logits = vit.tensor(LOGITS, requires_grad=True)
    with pytest.raises(vit.Error, match=r"\[cross_entropy\] target 1.9 at row 0 is not a class index"):
        vit.nn.functional.cross_entropy(logits, [1.9, 0.2])  # once trained on [1, 0]
    with pytest.raises(vit.Error, match=r"target nan at row 1 is not a class index"):
        vit.nn.functional.cross_entropy(logits, vit.tensor([0.0, float("nan")]))  # once the index -2^63
    with pytest.raises(vit.Error, match=r"target inf at row 0"):
        vit.nn.functional.cross_entropy(logits, np.array([np.inf, 0.0]))
    with pytest.raises(vit.Error, match=r"class indices are integers, got booleans"):
        vit.nn.functional.cross_entropy(logits, [True, False])
    with pytest.raises(vit.Error, match=r"target 3 at row 1 is out of range for 3 classes"):
        vit.nn.functional.cross_entropy(logits, [0, 3])
    # Whole numbers in any form are the same classes: -log softmax picks 1/3 and e^1/(e^1+e^2+e^3).
    expected = (1.0986123 + 2.4076059) / 2
    for target in ([0, 0], [0.0, 0.0], np.array([0, 0], np.int64), vit.tensor([0.0, 0.0])):
        assert vit.nn.functional.cross_entropy(logits, target).item() == pytest.approx(expected, rel=1e-6)


def test_probability_targets_of_the_inputs_shape_are_soft_labels():
    logits = vit.tensor(LOGITS, requires_grad=True)
    target = vit.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]], requires_grad=True)
    loss = vit.nn.functional.cross_entropy(logits, target)
    # torch: mean over rows of -sum(p * log_softmax(z)) = (1.0986123 + (2.4076059 + 1.4076059) / 2) / 2
    assert loss.item() == pytest.approx(1.5031091, rel=1e-6)
    loss.backward()
    # d/dz = (softmax(z) - p) / B; d/dp = -log_softmax(z) / B
    np.testing.assert_allclose(logits.grad.numpy(), [[-0.3333333, 0.1666667, 0.1666667],
                                                     [-0.2049847, -0.1276358, 0.3326205]], atol=1e-6)
    np.testing.assert_allclose(target.grad.numpy(), [[0.5493061, 0.5493061, 0.5493061],
                                                     [1.2038030, 0.7038030, 0.2038030]], atol=1e-6)
    one_hot = vit.nn.functional.cross_entropy(logits, np.eye(3)[[2, 0]])  # probabilities from numpy
    assert one_hot.item() == pytest.approx(vit.nn.functional.cross_entropy(logits, [2, 0]).item(), rel=1e-6)
    with pytest.raises(vit.Error, match=r"class probabilities must have the input's shape \(2, 3\), got \(2, 4\)"):
        vit.nn.functional.cross_entropy(logits, np.zeros((2, 4)))


# ---- indexing with True / False / None / ... ----

def test_boolean_scalars_add_a_dimension_as_numpy_and_torch():
    t = vit.arange(6.0).reshape(2, 3)
    assert t[True].shape == (1, 2, 3) and t[True].tolist() == [t.tolist()]  # once t[1]
    assert t[False].shape == (0, 2, 3)  # once t[0]
    assert t[0, True].shape == (1, 3) and t[True, 0].shape == (1, 3)
    assert t[np.True_].shape == (1, 2, 3)
    assert t[None].shape == (1, 2, 3) and t[:, None].shape == (2, 1, 3)
    assert t[..., 1].tolist() == [1.0, 4.0] and t[1, ...].tolist() == [3.0, 4.0, 5.0]
    assert t[np.int64(1), np.int32(2)].item() == 5.0  # numpy integers index as Python's
    x = vit.tensor([[1.0, 2.0]], requires_grad=True)
    (x[True] * 3.0).sum().backward()  # a view: gradients flow through
    np.testing.assert_array_equal(x.grad.numpy(), [[3.0, 3.0]])
    with pytest.raises(vit.Error, match=r"an index can only have a single ellipsis"):
        t[..., ...]
    with pytest.raises(vit.Error, match=r"3 indices for a tensor of 2 dimensions"):
        t[0, 0, 0]
    with pytest.raises(vit.Error, match=r"integers and slices .*, or None, \.\.\. and True/False .*got float"):
        t[1.0]
    with pytest.raises(vit.Error, match=r"a 0-dimensional tensor takes no integer or slice index: .*\.item\(\)"):
        vit.tensor(5.0)[np.int64(0)]
    assert vit.tensor(5.0)[None].shape == (1,)
    for key in ([0, 1], np.array([0, 1]), vit.tensor([0.0])):
        with pytest.raises(vit.Error, match=r"a list, array or tensor of indices \(advanced indexing\) is not"):
            t[key]


# ---- numpy values mix with tensors; wrong arguments are named ----

def test_numpy_scalars_and_arrays_mix_with_tensors_as_numbers_do():
    t = vit.tensor([1.0, 2.0])
    for result in (np.float32(2.0) * t, t * np.float32(2.0), np.array([2.0, 2.0]) * t, np.int64(2) * t):
        assert isinstance(result, vit.Tensor) and result.tolist() == [2.0, 4.0]
    assert (np.float64(1.0) - vit.tensor(3.0)).item() == -2.0  # once: "[index] 1 indices for ... 0 dimensions"
    assert (t ** np.float32(2.0)).tolist() == [1.0, 4.0]
    np.testing.assert_array_equal((t == np.array([1.0, 0.0])).numpy(), [1, 0])
    np.testing.assert_array_equal((np.array([1.0, 0.0]) == t).numpy(), [1, 0])
    np.testing.assert_array_equal(np.asarray(vit.tensor([[1.0, 2.0]])), [[1.0, 2.0]])
    assert np.asarray(vit.tensor(3.0)).shape == ()
    assert vit.tensor([vit.tensor(1.0), vit.tensor(2.0)]).tolist() == [1.0, 2.0]
    assert vit.zeros(np.int64(2), 3).shape == (2, 3)
    with pytest.raises(TypeError, match=r"operand 'vit.Tensor' does not support ufuncs"):
        t * np.array(["a", "b"])  # strings are no operand: numpy's TypeError, as for Python's str


def test_wrong_arguments_are_vit_errors_naming_them():
    with pytest.raises(vit.Error, match=r"\[zeros\] size 1 must be an integer, got str"):
        vit.zeros([2, "a"])
    with pytest.raises(vit.Error, match=r"\[ones\] size 0 must be an integer, got float"):
        vit.ones(2.5)
    with pytest.raises(vit.Error, match=r"\[sum\] dim must be an integer, got str"):
        vit.zeros(2).sum(dim=["a"])
    with pytest.raises(vit.Error, match=r"\[VisionTransformer\] depth must be an integer, got float"):
        nn.VisionTransformer(depth=1.5)
    with pytest.raises(vit.Error, match=r"\[VisionTransformer\] mlp_ratio must be a number, got str"):
        nn.VisionTransformer(mlp_ratio="4")
    with pytest.raises(vit.Error, match=r"\[LayerNorm\] dim must be an integer, got str"):
        nn.LayerNorm(["a"])
    with pytest.raises(vit.Error, match=r"\[optimizer\] params must be tensors, got int at position 1"):
        vit.optim.SGD([vit.tensor([1.0], requires_grad=True), 3], lr=0.1)
    with pytest.raises(vit.Error, match=r"\[cat\] element 1 of tensors is int, not a vit.Tensor"):
        vit.cat([vit.zeros(2), 3])  # once pybind's "incompatible function arguments" with its overloads
    with pytest.raises(vit.Error, match=r"\[stack\] tensors must be a list or tuple of vit.Tensor, got Tensor"):
        vit.stack(vit.zeros(2))
    with pytest.raises(vit.Error, match=r"\[optimizer\] parameter groups \(dicts\) are not supported"):
        vit.optim.AdamW([{"params": []}])
    with pytest.raises(vit.Error, match=r"\[tensor\] data must be numbers .*got NoneType"):
        vit.tensor(None)  # numpy would make a NaN of it
    with pytest.raises(vit.Error, match=r"\[tensor\] data must be numbers .*got str"):
        vit.tensor("1.5")
    with pytest.raises(vit.Error, match=r"\[number\] 1000.* does not fit a float"):
        vit.tensor([1.0]) * 10 ** 400
    x = vit.tensor([1.0, 2.0], requires_grad=True)
    (x * 1.0).sum().backward()
    vit.optim.SGD((p for p in [x]), lr=0.5).step()  # any iterable of tensors, as torch takes a generator
    assert x.tolist() == [0.5, 1.5]


def test_arange_says_a_size_too_large_is_too_large():
    with pytest.raises(vit.Error, match=r"\[arange\] .*1e\+19 elements.*too large"):
        vit.arange(0, 1e19)
    assert vit.arange(0, 3, 0.5).tolist() == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
