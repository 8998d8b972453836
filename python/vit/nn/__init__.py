"""vit.nn: layers in torch.nn's names. Module (with ModuleList, Sequential and Parameter) is for
Python classes to subclass; the layers (Linear, Conv2d, LayerNorm, Dropout, GELU, ReLU, Tanh,
Softmax, PatchEmbed, MultiHeadSelfAttention, EncoderBlock, VisionTransformer) are the engine's
own, the ones the `vit` command trains; vit.nn.functional holds the ops as functions."""
from vit._C.nn import (GELU, Conv2d, Dropout, EncoderBlock, LayerNorm, Linear, MultiHeadSelfAttention, PatchEmbed,
                       ReLU, Softmax, Tanh, VisionTransformer)
from vit.nn.module import Module, ModuleList, Parameter, Sequential
from vit.nn import functional

__all__ = ["Conv2d", "Dropout", "EncoderBlock", "GELU", "LayerNorm", "Linear", "Module", "ModuleList",
           "MultiHeadSelfAttention", "Parameter", "PatchEmbed", "ReLU", "Sequential", "Softmax", "Tanh",
           "VisionTransformer", "functional"]
