"""vit.nn.functional: the engine's ops as functions (torch.nn.functional's names)."""
import numpy as np

from vit._C import Error, Tensor
from vit._C import functional as _C
from vit._C.functional import gelu, layer_norm, log_softmax, relu, softmax

__all__ = ["cross_entropy", "gelu", "layer_norm", "log_softmax", "relu", "softmax"]


def cross_entropy(input, target):
    """torch.nn.functional.cross_entropy (reduction='mean') of logits `input` (B, K) and a target
    that is either

    - class indices (B,): integers, or floats that are whole numbers (vit.tensor makes float32);
      1.9 or NaN name no class and are refused, or
    - class probabilities of input's shape (B, K) (soft labels, as torch reads a float target of
      the input's shape): the loss is the mean over rows of -sum_k target[k] * log_softmax(input)[k],
      and the gradient reaches the target too when it requires one.
    """
    shape = tuple(target.shape) if isinstance(target, Tensor) else np.shape(target)
    if len(shape) < 2 or not isinstance(input, Tensor) or input.dim() < 2:
        return _C.cross_entropy(input, target)
    if shape != tuple(input.shape):
        raise Error("[cross_entropy] class probabilities must have the input's shape %s, got %s (class indices: "
                    "one per row, shape (%d,))" % (tuple(input.shape), shape, input.shape[0]))
    probabilities = target if isinstance(target, Tensor) else Tensor(target)
    return -(probabilities * input.log_softmax(1)).sum() / input.shape[0]
