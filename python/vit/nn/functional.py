"""vit.nn.functional: the engine's ops as functions (torch.nn.functional's names)."""
from vit._C.functional import cross_entropy, gelu, layer_norm, relu, softmax

__all__ = ["cross_entropy", "gelu", "layer_norm", "relu", "softmax"]
