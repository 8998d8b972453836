"""vit: Vision Transformers in C++ -- load, run, embed, quantize and train ViTs from Python.

Two doors in one package, both over the C++ libraries (the compiled part is vit._C):

- the model door: vit.load(path, ...) gives a vit.Model that predicts and embeds numpy batches
  and image files (any file vit reads, ONNX exports of ViTs included); vit.quantize writes an int8
  copy; vit.export writes the model as ONNX; vit.train trains with `vit train`'s options
  as keywords.
- the engine door, in PyTorch's words: vit.Tensor (float32 with autograd), vit.tensor, zeros,
  rand, cat, ...; vit.nn (Module to subclass, the engine's layers, nn.functional); vit.optim.

Errors are vit.Error (a RuntimeError) with the messages the `vit` command prints.
"""
from vit._C import (Error, Model, Tensor, __version__, arange, cat, exp, export, load, manual_seed, matmul, no_grad,
                    num_threads, ones, quantize, rand, randn, set_num_threads, softmax, sqrt, stack, tanh, tensor,
                    train, zeros)
from vit._size import Size
from vit import nn, optim

__all__ = ["Error", "Model", "Size", "Tensor", "__version__", "arange", "cat", "exp", "export", "load", "manual_seed",
           "matmul", "nn", "no_grad", "num_threads", "ones", "optim", "quantize", "rand", "randn",
           "set_num_threads", "softmax", "sqrt", "stack", "tanh", "tensor", "train", "zeros"]
