#!/usr/bin/env python3
"""Generate torch.save / JAX .npz checkpoint references and hostile files for the .pth / .npz readers.

They test the readers of PyTorch files (.pth, .pt, pytorch_model.bin) and JAX .npz checkpoints.

Requirements: Debian's python3-torch (1.13), python3-torchvision (0.14), python3-numpy. Run with the
system interpreter:

    /usr/bin/python3 tools/golden/make_golden_pth.py                 # the committed files below
    /usr/bin/python3 tools/golden/make_golden_pth.py --vit-b-16 DIR  # only the load-time pair (not committed)

Deterministic (fixed seeds, one thread; the script re-executes itself with PYTHONHASHSEED=0 because
torch.jit.save orders a module's constants by set iteration); prints every file it writes with its
size and re-reads each valid one (torch.load / np.load) to check it. The model is the tiny ViT of
tools/golden/make_golden_layouts.py (image 32, patch 8 -> 16 patches + CLS, dim 48, depth 2, 4 heads, MLP 192,
exact GELU, 10 classes, CLS pooling) with the SAME weights (make_timm_weights(), seed 1234) and the same
input (randn(4,3,32,32) drawn next): the files are twins of tests/golden/layouts/*.safetensors (checked
bit for bit against them, and the recomputed logits against layouts/input.safetensors).
Every torch.save zip names its entries '<file stem>/...' (torch 1.13 does): e.g. torchvision/data.pkl,
torchvision/data/0 ..., torchvision/version.

tests/golden/pth/ -- valid files
  torchvision.pth      torch.save(tv.state_dict()): a real torchvision VisionTransformer holding the weights
                       (keys and order of layouts/torchvision.safetensors; OrderedDict with _metadata -> BUILD)
  timm_train.pth       {"model": timm state dict (with _metadata), "epoch": 7, "arch": "vit_tiny_test",
                        "args": argparse.Namespace(lr=5e-4, model="vit_tiny_test", batch_size=64,
                        drop_path=0.1, output_dir=PosixPath("/tmp/out")), "optimizer": AdamW.state_dict()
                        after one step training the head only (a linear probe, to keep the file small; 2
                        param groups: no-decay [head.bias] / decay 0.05 [head.weight]; state {i: {step,
                        exp_avg, exp_avg_sq}} for those 2 tensors), "metric": 81.5, "version": 2}. Needs full
                        unpickling in torch (weights_only=True refuses argparse.Namespace). "model" holds the
                        original weights.
  ddp.pth              {"state_dict": {"module."+k: v}, "state_dict_ema": {"module."+k: v_ema}}, timm keys;
                       v_ema = 0.9 * v + 0.1 for LayerNorm weights (norm1/norm2/norm .weight), 0.9 * v + 0.01
                       for every other tensor (logits_ema)
  pytorch_model.bin    torch.save(OrderedDict(hf_state_dict)): Hugging Face ViTForImageClassification keys
                       (those of layouts/hf.safetensors)
  views.pth            timm keys, same values, saved from views: head.weight (10,48) stride (1,10) (transpose
                       of a (48,10) storage); blocks.0.attn.qkv.weight (offset 0) and blocks.0.attn.proj.weight
                       (offset 6915) share ONE storage of 9219 floats (3 NaN between them); pos_embed at
                       offset 5 of an 828-float storage (NaN padding both sides); patch_embed.proj.weight
                       channels_last, stride (192,1,24,3). Logits: logits_timm.
  f16.pth, bf16.pth    timm keys, every tensor .half() / .bfloat16() (logits_f16 / logits_bf16)
  model_key.pth        {"model": timm state dict (with _metadata)}
  jax.npz              np.savez, google-research/vision_transformer names, float32, C order, keys sorted:
                       cls (1,1,48); embedding/kernel (8,8,3,48) HWIO; embedding/bias (48);
                       Transformer/posembed_input/pos_embedding (1,17,48);
                       Transformer/encoderblock_{i}/LayerNorm_0/{scale,bias} (norm1),
                         .../MultiHeadDotProductAttention_1/{query,key,value}/kernel (48,4,12), /bias (4,12),
                         .../MultiHeadDotProductAttention_1/out/kernel (4,12,48), /bias (48),
                         .../LayerNorm_2/{scale,bias} (norm2),
                         .../MlpBlock_3/Dense_0/kernel (48,192) /bias (192), .../MlpBlock_3/Dense_1/kernel
                         (192,48) /bias (48);
                       Transformer/encoder_norm/{scale,bias}; head/kernel (48,10); head/bias (10).
                       Inverse of timm's _load_weights (qkv.weight = cat([k.reshape(D,-1).T for q,k,v]),
                       proj.weight = out_kernel.transpose(2,0,1).reshape(D,D), Dense/head kernels = W.T,
                       conv = kernel.transpose(3,2,0,1)); checked by a port of _load_weights (jax_to_timm).
                       Logits: logits_timm.
  jax_compressed.npz   np.savez_compressed (deflate), the same arrays with every key prefixed "opt/target/"
  jax_prelogits.npz    jax.npz + pre_logits/kernel (48,48) (in,out) and pre_logits/bias (48), both
                       0.05 * randn from torch.Generator().manual_seed(4321) (kernel first).
                       logits_prelogits = head(tanh(f @ kernel + bias)), f = the CLS token after the final norm
  jax_bigvision.npz    big_vision names, prefix "params/": params/cls, params/embedding/{kernel,bias},
                       params/pos_embedding (1,16,48) = pos_embed[:, 1:] (patch tokens only),
                       params/Transformer/encoderblock/{LayerNorm_0, MultiHeadDotProductAttention_0/
                       {query,key,value,out}, LayerNorm_1, MlpBlock_0/Dense_{0,1}}/... with a leading depth
                       axis (e.g. LayerNorm_0/scale (2,48), query/kernel (2,48,4,12)),
                       params/Transformer/encoder_norm/{scale,bias}, params/head/{kernel,bias}.
                       logits_bigvision: timm's no_embed_class formula (x = patches + pos; prepend cls; blocks)
  expected.safetensors F32 (hand-written writer): input (4,3,32,32); logits (4,10): logits_timm,
                       logits_torchvision, logits_hf (HF formula, LayerNorm eps 1e-12), logits_ema,
                       logits_f16, logits_bf16 (timm formula on the rounded weights widened to F32),
                       logits_prelogits, logits_bigvision. All computed in float32; input, logits_timm,
                       _torchvision, _hf, _f16, _bf16 are bit-identical to layouts/input.safetensors
                       (there: logits_timm_f16 / logits_timm_bf16). The JAX logits use timm's exact-GELU
                       formula (flax's nn.gelu default is the tanh approximation: not modelled).

tests/golden/pth/hostile/ -- each must be refused with an error (never a crash, hang or huge allocation)
  .pth files are torch.save-format zips written by torch's own writer (torch._C.PyTorchFileWriter:
  '<stem>/data.pkl', '<stem>/data/<key>', '<stem>/version'), pickles hand-assembled (protocol 2):
  os_system.pth          {'weight': posix.system('echo pwned')}: GLOBAL 'posix system' + REDUCE
                         -> "global posix.system not allowed"
  builtins_eval.pth      {'weight': builtins.eval("__import__('os').system('echo pwned')")} -> global not allowed
  subprocess_popen.pth   {'weight': subprocess.Popen(['echo', 'pwned'])} -> global not allowed
  unknown_reduce.pth     {'weight': mymodule.Evil()}: GLOBAL 'mymodule Evil' + EMPTY_TUPLE + REDUCE
                         -> global not allowed
  unknown_newobj.pth     the same through NEWOBJ (GLOBAL, EMPTY_TUPLE, NEWOBJ) -> global not allowed
  memo_out_of_range.pth  {'weight': BINGET 7} with only memo 0 and 1 put -> memo index out of range
  truncated_pickle.pth   a real torch.save pickle of {weight (2,2), bias (2)} cut in half, no STOP (its
                         data/0, data/1 present) -> unexpected end of pickle
  nesting_bomb.pth       100000 EMPTY_LIST then 99999 APPEND (lists nested 100000 deep; ~200 KB)
                         -> nesting / stack limit exceeded (no stack overflow)
  storage_too_big.pth    {'weight': (1000,)} whose storage pid declares numel 1000 (4000 bytes) while data/0
                         holds 16 bytes -> storage larger than its entry
  storage_huge_numel.pth storage pid numel 2^62 (LONG1; numel * 4 wraps to 0 in 64 bits), tensor (4,),
                         data/0 16 bytes -> storage size overflow / larger than its entry
  offset_past_end.pth    storage numel 4 (data/0 16 bytes), tensor offset 2, size (4,), stride (1,): needs 6
                         elements -> tensor extends past its storage
  duplicate.pth          two 'duplicate/data.pkl' entries (each valid: weight 1..4 from data/0, 5..8 from
                         data/1; made by renaming 'data.pkX') -> duplicate zip entry
  bad_crc.pth            a valid {'weight': (2,2)} with one bit of data/0 flipped -> CRC mismatch
  legacy.pth             torch.save({'linear.weight': [[1,2],[3,4]]}, _use_new_zipfile_serialization=False)
                         (the pre-1.6 non-zip format; storage key renamed '0' for reproducibility)
                         -> "legacy (non-zip) torch.save format: re-save with torch >= 1.6"
  torchscript.pt         torch.jit.save(torch.jit.script(nn.Linear(2, 2))) after manual_seed(0): a zip with
                         code/, constants.pkl and a data.pkl naming __torch__.torch.nn.modules.linear.Linear
                         -> "TorchScript archive, not a state dict" (or global not allowed)
  not_a_state_dict.pth   torch.save({"a": 1, "b": [1, 2]}) (valid, no tensors) -> no tensors / not a state dict
  .npz files (raw zips assembled field by field, dates 1980-01-01):
  npz_bomb_declared.npz  x.npy deflated; its headers declare 8 GiB uncompressed (ZIP64 extra fields) while
                         the stream inflates to an .npy header for (2^31,) f4 + 4096 zero bytes
                         -> declared size over the limit (refused before inflating)
  npz_bomb_lying.npz     x.npy declares 1024 bytes uncompressed; its deflate stream (~65 KB) inflates to
                         64 MiB (+ .npy header) of zeros -> inflated data longer than declared (stop at the budget)
  dotdot.npz             one stored entry named '../../x.npy' (a valid (2,3) f32 .npy) -> unsafe entry name
  duplicate.npz          two stored 'x.npy' entries (values 0..5 and 10..15) -> duplicate entry
  truncated_cd.npz       np.savez of a, b, c cut in the middle of its central directory (no end record)
                         -> not a zip / end of central directory not found
  truncated_cd_eocd.npz  the same with the end record appended again (it claims the full central directory
                         at its old offset, which now overlaps the end record) -> central directory out of range
  bad_crc.npz            stored x.npy with one byte changed after the CRC was taken -> CRC mismatch
  Only the .pth files without code execution are given to torch.load(weights_only=True) here (its
  outcome is printed for reference); the code-execution ones are inspected with pickletools only.

tests/fuzz/corpus/pth/, tests/fuzz/corpus/npz/ -- fuzz seeds (each < 100 KiB; the golden model files are
  ~270 KB and so are not copied): seed_hostile_<name> = every hostile file above except nesting_bomb.pth
  (200 KB), whose stand-in is seed_nesting_bomb_mark.pth (40000 MARK then 40000 LIST); seed_small.pth
  (f32, f16, bf16, f64, int64 0-d, int32, uint8, bool, a transposed view, two views of one storage,
  a channels_last 4-D tensor, an empty (0,3)); seed_small_model_key.pth ({"model": the same with _metadata,
  "epoch": 3, "args": Namespace(lr=0.1)}); seed_small.npz / seed_small_compressed.npz (w (2,3) f4, h (2,) f2,
  s () f4, d (2,) f8); seed_layouts.npz (a Fortran-order (2,3) f4, a big-endian (3,) >f4, a (2,3,4) f4).

--vit-b-16 DIR (load-time benchmark, nothing committed): DIR/vit_b_16.pth = torch.save of
  torchvision.models.vit_b_16() (random init after torch.manual_seed(0)) state_dict(), and
  DIR/vit_b_16.safetensors = the same tensors (F32) with the tools/lib/safetensors_io.py writer (~330 MB each).
"""

import argparse
import os
import sys

if os.environ.get("PYTHONHASHSEED") != "0":  # reproducible torch.jit.save (see above)
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: lib, golden, ... import
# the cases live in tools/golden/pth_cases.py (the model and key maps in layouts_model.py)
from golden.pth_cases import make_corpus, make_hostile, make_valid, make_vit_b_16, written  # noqa: E402

torch.use_deterministic_algorithms(True)
torch.set_num_threads(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vit-b-16", metavar="DIR",
                    help="only write DIR/vit_b_16.pth and DIR/vit_b_16.safetensors (load-time benchmark)")
    args = ap.parse_args()
    if args.vit_b_16:
        make_vit_b_16(args.vit_b_16)
        return
    make_valid()
    make_hostile()
    make_corpus()
    total = sum(os.path.getsize(p) for p in written)
    print("total %d bytes in %d files" % (total, len(written)))


if __name__ == "__main__":
    main()
