"""make_golden.py's cases: one function per golden file (linear, layernorm, activations, softmax,
reduce, matmul, conv2d, patch_embed, attention, cross_entropy, mlp, encoder_block, batchnorm,
conv_block), each listing the tensor names it writes; CASES in file order."""

import math

import torch
import torch.nn.functional as F

from .ops_common import (B, D, N, Golden, grad_like, linear_params, randn, timm_attention, timm_mlp,
                         uniform, zero_grads)


# ----------------------------------------------------------------------------------------
# cases
# ----------------------------------------------------------------------------------------

# linear.safetensors
#   x (3,197,65), weight (33,65), bias (33), grad_out (3,197,33), out (3,197,33),
#   grad.x, grad.weight, grad.bias,
#   nobias.out, nobias.grad.x, nobias.grad.weight   (same x, weight, grad_out; no bias)
def case_linear():
    torch.manual_seed(1001)
    g = Golden("linear.safetensors")
    x = randn(B, N, D)
    w, b = linear_params(33, D)
    go = torch.randn(B, N, 33, dtype=torch.float32).double()
    out = F.linear(x, w, b)
    out.backward(go)
    for n, t in [("x", x), ("weight", w), ("bias", b), ("grad_out", go), ("out", out),
                 ("grad.x", x.grad), ("grad.weight", w.grad), ("grad.bias", b.grad)]:
        g.add(n, t)
    zero_grads(x, w, b)
    out2 = F.linear(x, w)
    out2.backward(go)
    g.add("nobias.out", out2)
    g.add("nobias.grad.x", x.grad)
    g.add("nobias.grad.weight", w.grad)
    return g


# layernorm.safetensors   (metadata: eps, nd.eps)
#   x (3,197,65) [randn*3+1], weight (65) [1+0.1*randn], bias (65) [0.1*randn], grad_out,
#   out, grad.x, grad.weight, grad.bias,
#   nd.x (3,5,7,9), nd.weight (7,9), nd.bias (7,9), nd.grad_out, nd.out,
#   nd.grad.x, nd.grad.weight, nd.grad.bias   (normalized over the last two dims)
def case_layernorm():
    torch.manual_seed(1002)
    g = Golden("layernorm.safetensors")
    eps = 1e-6
    x = randn(B, N, D, scale=3.0, shift=1.0)
    w = randn(D, scale=0.1, shift=1.0)
    b = randn(D, scale=0.1)
    go = grad_like(x)
    out = F.layer_norm(x, (D,), w, b, eps)
    out.backward(go)
    for n, t in [("x", x), ("weight", w), ("bias", b), ("grad_out", go), ("out", out),
                 ("grad.x", x.grad), ("grad.weight", w.grad), ("grad.bias", b.grad)]:
        g.add(n, t)
    g.meta("eps", repr(eps))

    eps2 = 1e-5
    x2 = randn(3, 5, 7, 9, scale=3.0, shift=1.0)
    w2 = randn(7, 9, scale=0.1, shift=1.0)
    b2 = randn(7, 9, scale=0.1)
    go2 = grad_like(x2)
    out2 = F.layer_norm(x2, (7, 9), w2, b2, eps2)
    out2.backward(go2)
    for n, t in [("x", x2), ("weight", w2), ("bias", b2), ("grad_out", go2), ("out", out2),
                 ("grad.x", x2.grad), ("grad.weight", w2.grad), ("grad.bias", b2.grad)]:
        g.add("nd." + n, t)
    g.meta("nd.eps", repr(eps2))
    return g


# activations.safetensors
#   x (2,33,31) [randn*3, first 8 = -300,-20,-5,-1e-4,0,1e-4,5,300 (float32)], grad_out,
#   gelu.out, gelu.grad.x            (exact erf GELU)
#   gelu_tanh.out, gelu_tanh.grad.x  (approximate='tanh')
#   relu.out, relu.grad.x            (grad at exactly 0 is 0)
#   tanh.out, tanh.grad.x, sigmoid.out, sigmoid.grad.x
#   exp.x (= x clamped to [-20,20]), exp.out, exp.grad.x
#   log.x (= |x|+0.1), log.out, log.grad.x
#   sqrt.x (= |x|+0.1), sqrt.out, sqrt.grad.x
#   (grad_out is shared by every activation; grad is w.r.t. that activation's own input)
def case_activations():
    torch.manual_seed(1003)
    g = Golden("activations.safetensors")
    x32 = torch.randn(2, 33, 31, dtype=torch.float32) * 3.0  # elementwise: awkward sizes suffice
    x32.view(-1)[:8] = torch.tensor([-300.0, -20.0, -5.0, -1e-4, 0.0, 1e-4, 5.0, 300.0],
                                    dtype=torch.float32)
    x = x32.double()
    go = grad_like(x)
    g.add("x", x)
    g.add("grad_out", go)

    def run(name, fn, inp, store_input):
        leaf = inp.detach().clone().requires_grad_(True)
        out = fn(leaf)
        out.backward(go)
        if store_input:
            g.add(name + ".x", leaf)
        g.add(name + ".out", out)
        g.add(name + ".grad.x", leaf.grad)

    run("gelu", lambda t: F.gelu(t), x, False)
    run("gelu_tanh", lambda t: F.gelu(t, approximate="tanh"), x, False)
    run("relu", F.relu, x, False)
    run("tanh", torch.tanh, x, False)
    run("sigmoid", torch.sigmoid, x, False)
    run("exp", torch.exp, x.clamp(-20.0, 20.0), True)
    # |x|+0.1 is computed in float32 so the stored input is float32-exact
    pos = (x32.abs() + 0.1).double()
    run("log", torch.log, pos, True)
    run("sqrt", torch.sqrt, pos, True)
    return g


# softmax.safetensors
#   x (2,197,65) [randn*4], grad_out,
#   softmax_last.out, softmax_last.grad.x          (dim=-1)
#   softmax_dim1.out, softmax_dim1.grad.x          (dim=1)
#   log_softmax_last.out, log_softmax_last.grad.x  (dim=-1)
def case_softmax():
    torch.manual_seed(1004)
    g = Golden("softmax.safetensors")
    x = randn(2, N, D, scale=4.0)
    go = grad_like(x)
    g.add("x", x)
    g.add("grad_out", go)
    for name, fn in [("softmax_last", lambda t: F.softmax(t, dim=-1)),
                     ("softmax_dim1", lambda t: F.softmax(t, dim=1)),
                     ("log_softmax_last", lambda t: F.log_softmax(t, dim=-1))]:
        zero_grads(x)
        out = fn(x)
        out.backward(go)
        g.add(name + ".out", out)
        g.add(name + ".grad.x", x.grad)
    return g


# reduce.safetensors
#   x (3,7,65); for each op P: P.out, P.grad_out (own upstream gradient), P.grad.x
#   sum_12  = x.sum(dim=(1,2))                       -> (3)
#   mean_0k = x.mean(dim=0, keepdim=True)            -> (1,7,65)
#   var_1u  = x.var(dim=1, unbiased=True)            -> (3,65)
#   var_1p  = x.var(dim=1, unbiased=False)           -> (3,65)
#   std_2u  = x.std(dim=2, unbiased=True, keepdim=True) -> (3,7,1)
#   std_2p  = x.std(dim=2, unbiased=False)           -> (3,7)
#   max_1   = x.max(dim=1).values                    -> (3,65); also max_1.indices (F64)
#   std_all = x.std() (unbiased)                     -> 0-dim
def case_reduce():
    torch.manual_seed(1005)
    g = Golden("reduce.safetensors")
    x = randn(3, 7, 65)
    g.add("x", x)
    ops = [
        ("sum_12", lambda t: t.sum(dim=(1, 2))),
        ("mean_0k", lambda t: t.mean(dim=0, keepdim=True)),
        ("var_1u", lambda t: t.var(dim=1, unbiased=True)),
        ("var_1p", lambda t: t.var(dim=1, unbiased=False)),
        ("std_2u", lambda t: t.std(dim=2, unbiased=True, keepdim=True)),
        ("std_2p", lambda t: t.std(dim=2, unbiased=False)),
        ("max_1", lambda t: t.max(dim=1)),
        ("std_all", lambda t: t.std()),
    ]
    for name, fn in ops:
        zero_grads(x)
        res = fn(x)
        indices = None
        if name == "max_1":
            out, indices = res.values, res.indices
        else:
            out = res
        go = grad_like(out)
        out.backward(go)
        g.add(name + ".out", out)
        g.add(name + ".grad_out", go)
        g.add(name + ".grad.x", x.grad)
        if indices is not None:
            g.add(name + ".indices", indices.double())
    return g


# matmul.safetensors
#   a (2,1,5,7), b (3,7,4), grad_out (2,3,5,4), out = a @ b (broadcast), grad.a, grad.b
#   bmm.a (4,6,9), bmm.b (4,9,5), bmm.grad_out (4,6,5), bmm.out, bmm.grad.a, bmm.grad.b
#   vec.a (5,7), vec.b (7), vec.grad_out (5), vec.out, vec.grad.a, vec.grad.b
def case_matmul():
    torch.manual_seed(1006)
    g = Golden("matmul.safetensors")
    for prefix, sa, sb in [("", (2, 1, 5, 7), (3, 7, 4)),
                           ("bmm.", (4, 6, 9), (4, 9, 5)),
                           ("vec.", (5, 7), (7,))]:
        a = randn(*sa)
        b = randn(*sb)
        out = a @ b
        go = grad_like(out)
        out.backward(go)
        for n, t in [("a", a), ("b", b), ("grad_out", go), ("out", out),
                     ("grad.a", a.grad), ("grad.b", b.grad)]:
            g.add(prefix + n, t)
    return g


# conv2d.safetensors   (metadata: stride, padding, gen.stride, gen.padding)
#   x (2,3,32,32), weight (8,3,4,4), bias (8), stride 4, padding 0, grad_out (2,8,8,8),
#   out, grad.x, grad.weight, grad.bias
#   gen.x (2,3,11,13), gen.weight (5,3,3,3), gen.bias (5), stride 2, padding 1,
#   gen.grad_out (2,5,6,7), gen.out, gen.grad.x, gen.grad.weight, gen.grad.bias
#   weight/bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = Cin*kh*kw
def case_conv2d():
    torch.manual_seed(1007)
    g = Golden("conv2d.safetensors")
    for prefix, sx, sw, stride, padding in [("", (2, 3, 32, 32), (8, 3, 4, 4), 4, 0),
                                            ("gen.", (2, 3, 11, 13), (5, 3, 3, 3), 2, 1)]:
        x = randn(*sx)
        bound = 1.0 / math.sqrt(sw[1] * sw[2] * sw[3])
        w = uniform(*sw, bound=bound)
        b = uniform(sw[0], bound=bound)
        out = F.conv2d(x, w, b, stride=stride, padding=padding)
        go = grad_like(out)
        out.backward(go)
        for n, t in [("x", x), ("weight", w), ("bias", b), ("grad_out", go), ("out", out),
                     ("grad.x", x.grad), ("grad.weight", w.grad), ("grad.bias", b.grad)]:
            g.add(prefix + n, t)
        g.meta(prefix + "stride", stride)
        g.meta(prefix + "padding", padding)
    return g


# patch_embed.safetensors   (metadata: patch_size)
#   x (3,3,28,28), proj.weight (65,3,7,7) [0.02*randn], proj.bias (65) [U(-1/sqrt(147), ..)],
#   grad_out (3,16,65), out (3,16,65) = conv(x, stride 7).flatten(2).transpose(1,2),
#   grad.x, grad.proj.weight, grad.proj.bias
def case_patch_embed():
    torch.manual_seed(1008)
    g = Golden("patch_embed.safetensors")
    P = 7
    x = randn(3, 3, 28, 28)
    w = randn(D, 3, P, P, scale=0.02)
    b = uniform(D, bound=1.0 / math.sqrt(3 * P * P))
    out = F.conv2d(x, w, b, stride=P).flatten(2).transpose(1, 2)
    go = grad_like(out)
    out.backward(go)
    for n, t in [("x", x), ("proj.weight", w), ("proj.bias", b), ("grad_out", go),
                 ("out", out), ("grad.x", x.grad), ("grad.proj.weight", w.grad),
                 ("grad.proj.bias", b.grad)]:
        g.add(n, t)
    g.meta("patch_size", P)
    return g


# attention.safetensors   (metadata: num_heads)
#   x (3,197,65), qkv.weight (195,65), qkv.bias (195), proj.weight (65,65), proj.bias (65),
#   grad_out (3,197,65), out, grad.x, grad.qkv.weight, grad.qkv.bias,
#   grad.proj.weight, grad.proj.bias
def case_attention():
    torch.manual_seed(1009)
    g = Golden("attention.safetensors")
    H = 5
    x = randn(B, N, D)
    qw, qb = linear_params(3 * D, D)
    pw, pb = linear_params(D, D)
    out = timm_attention(x, qw, qb, pw, pb, H)
    go = grad_like(out)
    out.backward(go)
    params = [("qkv.weight", qw), ("qkv.bias", qb), ("proj.weight", pw), ("proj.bias", pb)]
    g.add("x", x)
    for n, t in params:
        g.add(n, t)
    g.add("grad_out", go)
    g.add("out", out)
    g.add("grad.x", x.grad)
    for n, t in params:
        g.add("grad." + n, t.grad)
    g.meta("num_heads", H)
    return g


# cross_entropy.safetensors   (metadata: ls0.label_smoothing, ls1.label_smoothing)
#   logits (37,10) [randn*2], targets (37) [ints in [0,10) as F64],
#   ls0.loss (0-dim, mean reduction), ls0.grad.logits,
#   ls1.loss, ls1.grad.logits   (label_smoothing=0.1)
def case_cross_entropy():
    torch.manual_seed(1010)
    g = Golden("cross_entropy.safetensors")
    logits = randn(37, 10, scale=2.0)
    targets = torch.randint(0, 10, (37,), dtype=torch.int64)
    g.add("logits", logits)
    g.add("targets", targets.double())
    for prefix, ls in [("ls0.", 0.0), ("ls1.", 0.1)]:
        zero_grads(logits)
        loss = F.cross_entropy(logits, targets, label_smoothing=ls)
        loss.backward()
        g.add(prefix + "loss", loss)
        g.add(prefix + "grad.logits", logits.grad)
        g.meta(prefix + "label_smoothing", repr(ls))
    return g


# mlp.safetensors
#   x (3,197,65), fc1.weight (260,65), fc1.bias (260), fc2.weight (65,260), fc2.bias (65),
#   grad_out (3,197,65), out, grad.x, grad.fc1.weight, grad.fc1.bias,
#   grad.fc2.weight, grad.fc2.bias      (fc1 -> exact GELU -> fc2)
def case_mlp():
    torch.manual_seed(1011)
    g = Golden("mlp.safetensors")
    hid = 4 * D
    x = randn(B, N, D)
    w1, b1 = linear_params(hid, D)
    w2, b2 = linear_params(D, hid)
    out = timm_mlp(x, w1, b1, w2, b2)
    go = grad_like(out)
    out.backward(go)
    params = [("fc1.weight", w1), ("fc1.bias", b1), ("fc2.weight", w2), ("fc2.bias", b2)]
    g.add("x", x)
    for n, t in params:
        g.add(n, t)
    g.add("grad_out", go)
    g.add("out", out)
    g.add("grad.x", x.grad)
    for n, t in params:
        g.add("grad." + n, t.grad)
    return g


# encoder_block.safetensors   (metadata: num_heads, eps, mlp_ratio)
#   x (3,197,65), norm1.weight (65), norm1.bias (65), attn.qkv.weight (195,65),
#   attn.qkv.bias (195), attn.proj.weight (65,65), attn.proj.bias (65), norm2.weight (65),
#   norm2.bias (65), mlp.fc1.weight (260,65), mlp.fc1.bias (260), mlp.fc2.weight (65,260),
#   mlp.fc2.bias (65), grad_out (3,197,65), out, grad.x, grad.<every param above>
#   out = x + attn(norm1(x)); out = out + mlp(norm2(out))
def case_encoder_block():
    torch.manual_seed(1012)
    g = Golden("encoder_block.safetensors")
    H, eps, ratio = 5, 1e-6, 4
    x = randn(B, N, D)
    n1w = randn(D, scale=0.1, shift=1.0)
    n1b = randn(D, scale=0.1)
    qw, qb = linear_params(3 * D, D)
    pw, pb = linear_params(D, D)
    n2w = randn(D, scale=0.1, shift=1.0)
    n2b = randn(D, scale=0.1)
    f1w, f1b = linear_params(ratio * D, D)
    f2w, f2b = linear_params(D, ratio * D)
    h = x + timm_attention(F.layer_norm(x, (D,), n1w, n1b, eps), qw, qb, pw, pb, H)
    out = h + timm_mlp(F.layer_norm(h, (D,), n2w, n2b, eps), f1w, f1b, f2w, f2b)
    go = grad_like(out)
    out.backward(go)
    params = [("norm1.weight", n1w), ("norm1.bias", n1b),
              ("attn.qkv.weight", qw), ("attn.qkv.bias", qb),
              ("attn.proj.weight", pw), ("attn.proj.bias", pb),
              ("norm2.weight", n2w), ("norm2.bias", n2b),
              ("mlp.fc1.weight", f1w), ("mlp.fc1.bias", f1b),
              ("mlp.fc2.weight", f2w), ("mlp.fc2.bias", f2b)]
    g.add("x", x)
    for n, t in params:
        g.add(n, t)
    g.add("grad_out", go)
    g.add("out", out)
    g.add("grad.x", x.grad)
    for n, t in params:
        g.add("grad." + n, t.grad)
    g.meta("num_heads", H)
    g.meta("eps", repr(eps))
    g.meta("mlp_ratio", ratio)
    return g


# batchnorm.safetensors   (metadata: momentum, eps)
#   x (4,6,5,7) [randn*1.5+0.7], weight (6) [1+0.1*randn], bias (6) [0.1*randn],
#   running_mean (6) [0.1*randn], running_var (6) [1+U(0,0.5)] (the buffers before the step),
#   train.grad_out, train.out, train.grad.x, train.grad.weight, train.grad.bias,
#   train.running_mean, train.running_var (after one training step),
#   eval.grad_out, eval.out, eval.grad.x, eval.grad.weight, eval.grad.bias (the buffers above)
def case_batchnorm():
    torch.manual_seed(1013)
    g = Golden("batchnorm.safetensors")
    momentum, eps = 0.1, 1e-5
    x0 = randn(4, 6, 5, 7, scale=1.5, shift=0.7)
    w0 = randn(6, scale=0.1, shift=1.0)
    b0 = randn(6, scale=0.1)
    rm0 = (torch.randn(6, dtype=torch.float32) * 0.1).double()
    rv0 = (1.0 + torch.rand(6, dtype=torch.float32) * 0.5).double()
    for n, t in [("x", x0), ("weight", w0), ("bias", b0), ("running_mean", rm0), ("running_var", rv0)]:
        g.add(n, t)
    for mode in ("train", "eval"):
        x, w, b = (t.detach().clone().requires_grad_(True) for t in (x0, w0, b0))
        rm, rv = rm0.clone(), rv0.clone()
        out = F.batch_norm(x, rm, rv, w, b, training=(mode == "train"), momentum=momentum, eps=eps)
        go = grad_like(out)
        out.backward(go)
        for n, t in [("grad_out", go), ("out", out), ("grad.x", x.grad), ("grad.weight", w.grad),
                     ("grad.bias", b.grad)]:
            g.add(mode + "." + n, t)
        if mode == "train":
            g.add("train.running_mean", rm)
            g.add("train.running_var", rv)
    g.meta("momentum", momentum)
    g.meta("eps", eps)
    return g


# conv_block.safetensors   a ResNet basic block in training mode, downsampling:
#   y = relu(bn2(conv2(relu(bn1(conv1(x))))) + bn3(conv3(x))), conv1 3x3 stride 2 padding 1,
#   conv2 3x3 stride 1 padding 1, conv3 1x1 stride 2 (the shortcut), no conv biases, BatchNorm
#   weights 1+0.1*randn, biases 0.1*randn, default momentum and eps.
#   x (3,4,9,9), conv{1,2,3}.weight, bn{1,2,3}.{weight,bias}, grad_out (3,8,5,5), out,
#   grad.x, grad.conv{1,2,3}.weight, grad.bn{1,2,3}.{weight,bias}, bn{1,2,3}.running_{mean,var} (after)
def case_conv_block():
    torch.manual_seed(1014)
    g = Golden("conv_block.safetensors")
    x = randn(3, 4, 9, 9)
    convs = {"conv1": (8, 4, 3), "conv2": (8, 8, 3), "conv3": (8, 4, 1)}
    params = {}
    for name, (o, i, k) in convs.items():
        params[name + ".weight"] = uniform(o, i, k, k, bound=1.0 / math.sqrt(i * k * k))
    bns = {}
    for name in ("bn1", "bn2", "bn3"):
        params[name + ".weight"] = randn(8, scale=0.1, shift=1.0)
        params[name + ".bias"] = randn(8, scale=0.1)
        bns[name] = (torch.zeros(8, dtype=torch.float64), torch.ones(8, dtype=torch.float64))

    def bn(t, name):
        rm, rv = bns[name]
        return F.batch_norm(t, rm, rv, params[name + ".weight"], params[name + ".bias"], training=True)

    h = F.relu(bn(F.conv2d(x, params["conv1.weight"], stride=2, padding=1), "bn1"))
    h = bn(F.conv2d(h, params["conv2.weight"], stride=1, padding=1), "bn2")
    out = F.relu(h + bn(F.conv2d(x, params["conv3.weight"], stride=2), "bn3"))
    go = grad_like(out)
    out.backward(go)
    g.add("x", x)
    for n, t in params.items():
        g.add(n, t)
    g.add("grad_out", go)
    g.add("out", out)
    g.add("grad.x", x.grad)
    for n, t in params.items():
        g.add("grad." + n, t.grad)
    for name, (rm, rv) in bns.items():
        g.add(name + ".running_mean", rm)
        g.add(name + ".running_var", rv)
    return g


CASES = [case_linear, case_layernorm, case_activations, case_softmax, case_reduce,
         case_matmul, case_conv2d, case_patch_embed, case_attention, case_cross_entropy,
         case_mlp, case_encoder_block, case_batchnorm, case_conv_block]
