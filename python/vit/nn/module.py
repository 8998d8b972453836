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

    def _members(self):
        """(name, value) of the attributes, lists and tuples unrolled as name.0, name.1, ..."""
        for name, v in vars(self).items():
            if isinstance(v, (list, tuple)):
                for i, item in enumerate(v):
                    yield "%s.%d" % (name, i), item
            else:
                yield name, v

    def named_children(self):
        """The modules among the attributes, each once (a module set twice keeps its first name)."""
        seen = set()
        for name, v in self._members():
            if _is_layer(v) and id(v) not in seen:
                seen.add(id(v))
                yield name, v

    def children(self):
        return [m for _, m in self.named_children()]

    def named_parameters(self, prefix="", remove_duplicate=True):
        """The parameters (leaf tensors that require grad, the children's included), each once as
        torch gives them: a tensor shared by two attributes or two modules (tied weights) keeps its
        first name, so an optimiser steps it once. remove_duplicate=False lists every name."""
        seen = set()
        for name, p in self._all_parameters(prefix, remove_duplicate):
            if remove_duplicate:
                if p._cdata in seen:
                    continue
                seen.add(p._cdata)
            yield name, p

    def _all_parameters(self, prefix, remove_duplicate):
        for name, v in self._members():
            if isinstance(v, Tensor):
                if v.requires_grad and v.is_leaf:
                    yield prefix + name, v
            elif isinstance(v, Module):
                yield from v.named_parameters(prefix + name + ".", remove_duplicate)
            elif _is_layer(v):
                yield from v.named_parameters(prefix + name + ".")

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
        for name, m in self._members():
            if not _is_layer(m):
                continue
            lines.append("  (%s): %s" % (name, repr(m).replace("\n", "\n  ")))
        return lines[0] + ")" if len(lines) == 1 else "\n".join(lines) + "\n)"


class ModuleList(Module):
    def __init__(self, modules=()):
        super().__init__()
        object.__setattr__(self, "_modules", list(modules))

    def _members(self):
        for i, m in enumerate(self._modules):
            yield str(i), m

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
