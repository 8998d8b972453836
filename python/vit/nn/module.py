"""The parts of torch.nn.Module that are Python's by nature: a Module finds its parameters through
its attributes (tensors that require grad, modules, and lists or tuples of modules), train/eval
reach its children, and the containers ModuleList and Sequential. The engine's layers
(vit.nn.Linear, ...) are modules too: anything with named_parameters() and train() counts."""
from vit._C import Tensor


def _is_layer(v):
    return hasattr(v, "named_parameters") and hasattr(v, "train") and not isinstance(v, type)


class Module:
    """Subclass it as torch.nn.Module: parameters are found through the attributes (tensors that
    require grad, modules, and lists or tuples of modules), in the order they were set."""

    def __init__(self):
        object.__setattr__(self, "training", True)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(type(self).__name__ + " has no forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def named_children(self):
        for name, v in vars(self).items():
            if _is_layer(v):
                yield name, v
            elif isinstance(v, (list, tuple)):
                for i, item in enumerate(v):
                    if _is_layer(item):
                        yield "%s.%d" % (name, i), item

    def children(self):
        return [m for _, m in self.named_children()]

    def named_parameters(self, prefix=""):
        seen = set()
        for name, v in vars(self).items():
            if isinstance(v, Tensor):
                if v.requires_grad and v.is_leaf and id(v) not in seen:
                    seen.add(id(v))
                    yield prefix + name, v
            elif _is_layer(v):
                yield from v.named_parameters(prefix + name + ".")
            elif isinstance(v, (list, tuple)):
                for i, item in enumerate(v):
                    if _is_layer(item):
                        yield from item.named_parameters("%s%s.%d." % (prefix, name, i))
                    elif isinstance(item, Tensor) and item.requires_grad and item.is_leaf:
                        yield "%s%s.%d" % (prefix, name, i), item

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def train(self, mode=True):
        object.__setattr__(self, "training", mode)
        for _, m in self.named_children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def zero_grad(self):
        for p in self.parameters():
            p.grad = None

    def __repr__(self):
        lines = [type(self).__name__ + "("]
        for name, m in self.named_children():
            lines.append("  (%s): %s" % (name, repr(m).replace("\n", "\n  ")))
        return lines[0] + ")" if len(lines) == 1 else "\n".join(lines) + "\n)"


class ModuleList(Module):
    def __init__(self, modules=()):
        super().__init__()
        object.__setattr__(self, "_modules", list(modules))

    def named_children(self):
        for i, m in enumerate(self._modules):
            yield str(i), m

    def named_parameters(self, prefix=""):
        for i, m in enumerate(self._modules):
            yield from m.named_parameters("%s%d." % (prefix, i))

    def append(self, module):
        self._modules.append(module)
        return self

    def __getitem__(self, i):
        return self._modules[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)


class Sequential(ModuleList):
    def __init__(self, *modules):
        super().__init__(modules)

    def forward(self, x):
        for m in self._modules:
            x = m(x)
        return x


def Parameter(data, requires_grad=True):
    """A leaf tensor that requires grad (what torch.nn.Parameter marks)."""
    return Tensor(data, requires_grad=requires_grad)


for _cls in (Module, ModuleList, Sequential):
    _cls.__module__ = "vit.nn"
del _cls
Parameter.__module__ = "vit.nn"
