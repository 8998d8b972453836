"""vit.optim: the engine's optimisers (torch.optim's names and arguments) over a list of tensors,
such as a module's parameters(): SGD (momentum, weight decay) and AdamW (decoupled weight decay)."""
from vit._C.optim import AdamW, Optimizer, SGD

__all__ = ["AdamW", "Optimizer", "SGD"]
