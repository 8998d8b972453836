"""vit.Size: a tensor's shape (what Tensor.shape and Tensor.size() return)."""


class Size(tuple):
    """A tensor's shape, as torch.Size prints it."""

    __module__ = "vit"

    def __repr__(self):
        return "vit.Size(%s)" % list(self)
