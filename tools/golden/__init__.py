"""Modules of the golden-file generators (the entry scripts make_golden*.py and quantize_reference.py
beside them import these).

  ops_common.py        make_golden.py: the F64 safetensors writer/reader (Golden), value draws, timm
                       attention/MLP helpers (also used by make_golden_vit.py)
  ops_cases.py         make_golden.py: the per-op cases (linear ... encoder_block), CASES
  layouts_model.py     make_golden_layouts.py: the tiny ViT config, its timm weights and formula, the
                       Hugging Face ViT modules and the timm -> HF / torchvision key maps
  layouts_cases.py     make_golden_layouts.py: file writing/checking, the layouts/ and preprocess/ files
  pth_cases.py         make_golden_pth.py: the torch.save / .npz files, the hostile ones, the fuzz seeds
  variants_timm.py     make_golden_variants.py: Cfg, the canonical weights, timm's functional forward
  variants_hf.py       make_golden_variants.py: the Hugging Face DeiT / DINOv2 / CLIP modules
  variants_io.py       make_golden_variants.py: key conversions, load_hf, the file writer (emit)
  variants_cases.py    make_golden_variants.py: the inference cases and the training golden
  variants_notebook.py make_golden_variants.py: the ViT notebook's model and its golden

make_golden_finetune.py uses variants_timm.py; the safetensors writer/reader is tools/lib/safetensors_io.py.

Each entry script puts tools/ on sys.path (so `golden` and `lib` import as packages) and sets
torch's determinism (use_deterministic_algorithms, one thread) before generating anything.
"""
