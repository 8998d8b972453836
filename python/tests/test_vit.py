"""The Python module `vit`, as a timm user would use it (run by ctest: python.module).

Needs PYTHONPATH=build/python, VIT_BINARY (the vit command, for the same-logits checks) and
VIT_GOLDEN_DIR (tests/golden). No PyTorch: references come from the committed golden files.
"""

import json
import os
import struct
import subprocess
import tempfile
import threading
import time

import numpy as np
import pytest

import vit

GOLDEN = os.environ["VIT_GOLDEN_DIR"]
VIT = os.environ["VIT_BINARY"]
TIMM = os.path.join(GOLDEN, "layouts", "timm.safetensors")  # 3x32x32, 10 classes, width 48, 4 heads
VARIANTS = os.path.join(GOLDEN, "variants")


def read_safetensors(path):
    """A minimal safetensors reader (F32/F64/I64), enough for the reference files."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    body = raw[8 + n:]
    kinds = {"F32": "<f4", "F64": "<f8", "I64": "<i8"}
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        out[name] = np.frombuffer(body[b:e], dtype=kinds[info["dtype"]]).reshape(info["shape"])
    return out


def relative_error(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def cli(*args):
    return subprocess.run([VIT, *args], capture_output=True, text=True, check=False)


# ---- loading and running models ----

def test_predict_equals_vit_predict_and_takes_numpy_without_copying():
    m = vit.load(TIMM, heads=4)
    assert (m.image_size, m.in_channels, m.num_classes, m.layout) == (32, 3, 10, "timm")
    x = np.random.default_rng(0).standard_normal((5, 3, 32, 32)).astype(np.float32)
    logits = m.predict(x)
    assert logits.shape == (5, 10) and logits.dtype == np.float32
    with tempfile.TemporaryDirectory() as d:
        np.save(os.path.join(d, "x.npy"), x)
        r = cli("predict", "--checkpoint", TIMM, "--heads", "4", "--tensor", os.path.join(d, "x.npy"),
                "--out", os.path.join(d, "l.npy"))
        assert r.returncode == 0, r.stdout + r.stderr
        np.testing.assert_array_equal(logits, np.load(os.path.join(d, "l.npy")))
    # Non-contiguous and float64 inputs are converted (a copy), with the same answer.
    np.testing.assert_array_equal(m.predict(np.asfortranarray(x.astype(np.float64))), logits)
    np.testing.assert_array_equal(m.predict(x[::-1].copy())[::-1], logits)
    assert m.predict(np.zeros((0, 3, 32, 32), np.float32)).shape == (0, 10)


def test_pytorch_and_jax_files_load_like_safetensors():
    pth = os.path.join(GOLDEN, "pth")
    ref = read_safetensors(os.path.join(pth, "expected.safetensors"))
    x = ref["input"]
    twin = vit.load(TIMM, heads=4).predict(x)
    m = vit.load(os.path.join(pth, "timm_train.pth"), heads=4)  # {"model": ..., "args": Namespace, ...}
    assert m.layout == "timm"
    np.testing.assert_array_equal(m.predict(x), twin)
    jax = vit.load(os.path.join(pth, "jax.npz"))  # JAX names; the head count from the query kernel
    assert jax.layout == "jax"
    np.testing.assert_array_equal(jax.predict(x), twin)
    ema = vit.load(os.path.join(pth, "ddp.pth"), heads=4, ema=True)
    assert relative_error(ema.predict(x), ref["logits_ema"]) <= 1e-5
    with pytest.raises(vit.Error, match="global 'posix.system' is refused"):
        vit.load(os.path.join(pth, "hostile", "os_system.pth"), heads=4)


def test_descendants_match_pytorch_references():
    ref = read_safetensors(os.path.join(VARIANTS, "deit_distilled.expected.safetensors"))
    m = vit.load(os.path.join(VARIANTS, "deit_distilled.hf.safetensors"), heads=2)
    assert m.family == "deit" and m.layout == "huggingface"
    assert relative_error(m.predict(ref["input_b3"]), ref["logits_b3.hf"]) <= 1e-4
    ref = read_safetensors(os.path.join(VARIANTS, "clip.expected.safetensors"))
    m = vit.load(os.path.join(VARIANTS, "clip.hf.safetensors"), heads=2)
    assert not m.has_classifier and m.embed_dim == 24
    assert relative_error(m.embed(ref["input_b3"]), ref["features_b3.hf"]) <= 1e-4
    tokens = m.embed(ref["input_b3"], pool="tokens")
    assert tokens.shape == (3, 17, 32)
    assert relative_error(tokens, ref["tokens_b3.hf"]) <= 1e-4
    with pytest.raises(vit.Error, match="no classifier head"):
        m.predict(ref["input_b3"])
    ref = read_safetensors(os.path.join(VARIANTS, "dinov2.expected.safetensors"))
    m = vit.load(os.path.join(VARIANTS, "dinov2.timm.safetensors"), heads=2, image_size=28)
    assert relative_error(m.embed(ref["input_b3_at28"]), ref["features_b3_at28.timm"]) <= 1e-4


def test_images_are_decoded_and_classified_as_vit_predict_does():
    image = os.path.join(GOLDEN, "preprocess", "coffee.png")
    m = vit.load(TIMM, heads=4)
    [top] = m.predict_images([image], top_k=3)
    assert len(top) == 3 and top[0]["probability"] >= top[1]["probability"] >= top[2]["probability"]
    assert set(top[0]) == {"index", "label", "probability"}
    r = cli("predict", "--checkpoint", TIMM, "--heads", "4", "--top-k", "1", image)
    assert r.returncode == 0, r.stderr
    assert "%6.2f%%  %s" % (100 * top[0]["probability"], top[0]["label"]) in r.stdout
    pixels = m.load_image(image)
    assert pixels.shape == (3, 32, 32)
    np.testing.assert_allclose(m.predict(pixels[None])[0].argmax(), top[0]["index"])


def test_the_same_image_is_the_same_tensor_as_vit_predict_gives():
    # Model.load_image (the C++ facade's) against the tensor `vit predict --save-input` fed the model:
    # bit for bit, for a timm classifier and a torchvision one (their own evaluation transforms).
    image = os.path.join(GOLDEN, "preprocess", "chelsea.png")
    for path in (TIMM, os.path.join(GOLDEN, "pth", "torchvision.pth")):
        with tempfile.TemporaryDirectory() as d:
            saved = os.path.join(d, "input.npy")
            r = cli("predict", "--checkpoint", path, "--heads", "4", image, "--save-input", saved)
            assert r.returncode == 0, r.stderr
            given = np.load(saved)
            pixels = vit.load(path, heads=4).load_image(image)
            assert given.shape == (1,) + pixels.shape
            assert np.array_equal(given[0], pixels), path


def test_errors_are_vit_errors_with_the_commands_messages():
    with pytest.raises(vit.Error, match=r"\[file\] /nonexistent.safetensors: cannot open \(No such file"):
        vit.load("/nonexistent.safetensors")
    with pytest.raises(vit.Error, match="pass --heads"):
        vit.load(TIMM)  # width 48: the head count cannot be guessed
    with pytest.raises(vit.Error, match=r"layout: must be one of timm, torchvision, huggingface, jax, got 'keras'"):
        vit.load(TIMM, heads=4, layout="keras")
    m = vit.load(TIMM, heads=4)
    with pytest.raises(vit.Error, match=r"input \(2, 3, 16, 16\) but the model takes \(B, 3, 32, 32\)"):
        m.predict(np.zeros((2, 3, 16, 16), np.float32))
    bad = np.zeros((1, 3, 32, 32), np.float32)
    bad[0, 1, 2, 3] = np.nan
    with pytest.raises(vit.Error, match="NaN or infinity"):
        m.predict(bad)
    with pytest.raises(vit.Error, match="pool must be cls, avg or tokens"):
        m.embed(np.zeros((1, 3, 32, 32), np.float32), pool="max")
    with pytest.raises(vit.Error):
        m.predict_images(["/nonexistent.png"])
    assert issubclass(vit.Error, RuntimeError)


def test_the_gil_is_released_while_the_model_runs():
    m = vit.load(TIMM, heads=4)
    x = np.random.default_rng(1).standard_normal((2048, 3, 32, 32)).astype(np.float32)
    ticks = []
    done = threading.Event()

    def count():
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    time.sleep(0.01)
    start = time.perf_counter()
    m.predict(x)
    end = time.perf_counter()
    done.set()
    t.join()
    during = [s for s in ticks if start < s < end]
    assert end - start > 0.02, "the batch ran too fast to tell"
    assert len(during) >= 3, "the counting thread did not run while predict did (GIL held?)"


# ---- quantization and training ----

def test_quantize_writes_an_int8_model_that_stays_close():
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "int8.safetensors")
        r = vit.quantize(TIMM, out, heads=4)
        assert r["tensors"] == 9 and r["out_bytes"] < r["in_bytes"]
        with pytest.raises(vit.Error, match="exists"):
            vit.quantize(TIMM, out, heads=4)
        x = np.random.default_rng(2).standard_normal((4, 3, 32, 32)).astype(np.float32)
        f, q = vit.load(TIMM, heads=4).predict(x), vit.load(out).predict(x)
        cosine = (f * q).sum() / np.linalg.norm(f) / np.linalg.norm(q)
        assert cosine > 0.99


def test_export_writes_onnx_that_loads_back_and_torch_exports_load():
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "m.onnx")
        r = vit.export(TIMM, out, heads=4)
        assert r["outputs"] == ["logits", "embedding"] and r["precision"] == "float32" and r["bytes"] > 0
        with pytest.raises(vit.Error, match=r"\[export\] out .* exists \(overwrite replaces it\)"):
            vit.export(TIMM, out, heads=4)
        x = np.random.default_rng(4).standard_normal((2, 3, 32, 32)).astype(np.float32)
        assert np.array_equal(vit.load(out).predict(x), vit.load(TIMM, heads=4).predict(x))
        q = vit.export(TIMM, os.path.join(d, "q.onnx"), heads=4, precision="int8", opset=16)
        assert q["precision"] == "int8"
        with pytest.raises(vit.Error, match="precision must be float32 or int8, got 'fp16'"):
            vit.export(TIMM, os.path.join(d, "h.onnx"), heads=4, precision="fp16")
        with pytest.raises(vit.Error, match="--opset 12: vit writes opsets 13 to 17"):
            vit.export(TIMM, os.path.join(d, "o.onnx"), heads=4, opset=12)
    # a torchvision ViT exported by PyTorch 1.13 (opset 14): its logits as PyTorch computed them
    model = vit.load(os.path.join(GOLDEN, "onnx", "torchvision_op14.onnx"))
    assert model.layout == "torchvision" and model.num_classes == 10
    expected = read_safetensors(os.path.join(GOLDEN, "onnx", "expected.safetensors"))
    logits = model.predict(expected["input"].astype(np.float32))
    want = expected["torchvision.logits"]
    assert np.abs(logits - want).max() <= 1e-5 * np.abs(want).max()


def write_toy_digits(folder, n_train=96, n_test=32):
    """IDX files of a learnable toy task: label k = horizontal stripes every k + 2 rows."""
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    for split, n in (("train", n_train), ("t10k", n_test)):
        labels = (np.arange(n) % 10).astype(np.uint8)
        images = (rng.random((n, 28, 28)) * 40).astype(np.uint8)
        for i, k in enumerate(labels):
            images[i, ::k + 2, :] = 255
        with open(os.path.join(folder, split + "-images-idx3-ubyte"), "wb") as f:
            f.write(struct.pack(">IIII", 2051, n, 28, 28) + images.tobytes())
        with open(os.path.join(folder, split + "-labels-idx1-ubyte"), "wb") as f:
            f.write(struct.pack(">II", 2049, n) + labels.tobytes())


def test_train_with_a_per_epoch_callback_that_can_stop_and_resume():
    with tempfile.TemporaryDirectory() as d:
        write_toy_digits(os.path.join(d, "data"))
        seen = []

        def on_epoch(report):
            seen.append(report)
            return report["epoch"] < 2  # stop after the second epoch

        flags = dict(data=os.path.join(d, "data"), out=os.path.join(d, "run"), preset="vit_digits", dim=16, depth=1,
                     heads=2, epochs=3, batch_size=32, plain=True, hflip=False, layer_scale=0.1, reg_tokens=2)
        r = vit.train(on_epoch=on_epoch, **flags)
        assert [s["epoch"] for s in seen] == [1, 2] and r["epochs_run"] == 2
        assert os.path.exists(seen[-1]["checkpoint"]) and 0 <= seen[-1]["test_accuracy"] <= 1
        r = vit.train(resume=os.path.join(d, "run"), plain=True)
        assert r["epochs_run"] == 3
        m = vit.load(os.path.join(d, "run", "last.safetensors"))
        assert m.config["reg_tokens"] == 2 and m.config["layer_scale"] == 0.1

        # A callback's exception ends the run with that exception.
        def boom(report):
            raise KeyError("from the callback")

        with pytest.raises(KeyError, match="from the callback"):
            vit.train(on_epoch=boom, **dict(flags, out=os.path.join(d, "run2")))
        with pytest.raises(vit.Error, match="--epochs must be >= 1"):
            vit.train(**dict(flags, out=os.path.join(d, "run3"), epochs=0))
        with pytest.raises(vit.Error, match="unknown option no_such_flag"):
            vit.train(no_such_flag=3)


def test_on_epoch_answers_are_read_by_their_truth():
    # Any answer counts by Python's truth (an empty list stops), not only True/False (once pybind11's
    # "Unable to cast Python instance to C++ type").
    with tempfile.TemporaryDirectory() as d:
        write_toy_digits(os.path.join(d, "data"))
        flags = dict(data=os.path.join(d, "data"), out=os.path.join(d, "run"), preset="vit_digits", dim=16, depth=1,
                     heads=2, epochs=3, batch_size=32, plain=True)
        assert vit.train(on_epoch=lambda report: [], **flags)["epochs_run"] == 1


def saved_config(checkpoint, key):
    """A JSON entry of a vit checkpoint's metadata ("train_config", "model_config")."""
    with open(checkpoint, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(json.loads(raw[8:8 + n])["__metadata__"][key])


def test_train_keyword_false_turns_off_what_the_recipe_turns_on():
    with tempfile.TemporaryDirectory() as d:
        write_toy_digits(os.path.join(d, "data"))
        flags = dict(data=os.path.join(d, "data"), out=os.path.join(d, "run"), dim=16, depth=1, heads=2, epochs=1,
                     batch_size=32, plain=True, overwrite=True)
        vit.train(**flags)  # the default recipe (Fashion-MNIST's) flips images
        last = os.path.join(d, "run", "last.safetensors")
        assert saved_config(last, "train_config")["augment"]["hflip"] is True
        vit.train(**flags, hflip=False, qkv_bias=False)
        assert saved_config(last, "train_config")["augment"]["hflip"] is False
        assert saved_config(last, "model_config")["qkv_bias"] is False
        vit.train(**flags, precision="bf16")  # mixed precision; the checkpoint stays float32
        assert saved_config(last, "train_config")["precision"] == "bf16"
        assert vit.load(last).predict(np.zeros((1, 1, 28, 28), np.float32)).dtype == np.float32


def test_the_hybrid_main_job_model_trains_loads_and_predicts_as_vit_predict():
    # vit_hybrid_fashion (convolutions + BatchNorm, then the transformer), small: trained from
    # Python, loaded, its logits those of `vit predict`, its tokens the 7x7 map's positions.
    with tempfile.TemporaryDirectory() as d:
        write_toy_digits(os.path.join(d, "data"))
        r = vit.train(data=os.path.join(d, "data"), out=os.path.join(d, "run"), preset="vit_hybrid_fashion",
                      conv_channels=8, dim=16, epochs=1, batch_size=32, plain=True, ema=0)
        assert r["epochs_run"] == 1
        last = os.path.join(d, "run", "last.safetensors")
        m = vit.load(last)
        assert m.config["conv_stages"] == 2 and (m.image_size, m.in_channels) == (28, 1)
        x = np.random.default_rng(1).standard_normal((3, 1, 28, 28)).astype(np.float32)
        logits = m.predict(x)
        np.save(os.path.join(d, "x.npy"), x)
        r = cli("predict", "--checkpoint", last, "--tensor", os.path.join(d, "x.npy"), "--out",
                os.path.join(d, "l.npy"))
        assert r.returncode == 0, r.stdout + r.stderr
        np.testing.assert_array_equal(logits, np.load(os.path.join(d, "l.npy")))
        assert m.embed(x, pool="tokens").shape == (3, 49, 16)


def test_train_init_fine_tunes_a_checkpoint_with_a_frozen_backbone():
    with tempfile.TemporaryDirectory() as d:
        write_toy_digits(os.path.join(d, "data"))
        base = dict(data=os.path.join(d, "data"), epochs=1, batch_size=32, plain=True)
        vit.train(**base, out=os.path.join(d, "pre"), preset="vit_digits", dim=16, depth=1, heads=2, ema=0)
        pre = os.path.join(d, "pre", "last.safetensors")
        r = vit.train(**base, out=os.path.join(d, "ft"), init=pre, freeze="backbone", layer_decay=0.75)
        assert r["epochs_run"] == 1
        ft = os.path.join(d, "ft", "last.safetensors")
        config = saved_config(ft, "train_config")
        assert config["init"] == pre and config["freeze"] == "backbone" and config["layer_decay"] == 0.75
        assert any("head kept" in note for note in config["init_notes"])
        x = np.zeros((1, 1, 28, 28), np.float32)
        assert vit.load(ft).predict(x).shape == vit.load(pre).predict(x).shape
        with pytest.raises(vit.Error, match="--init excludes --preset|init excludes preset"):
            vit.train(**base, out=os.path.join(d, "bad"), init=pre, preset="vit_digits")
        assert not os.path.exists(os.path.join(d, "bad"))


# ---- the seed notebooks' checks, through the module's tensors ----

def test_notebook_layernorm_statistics():
    x = vit.Tensor(np.array([[0, 4], [-1, 7], [3, 5]], dtype=np.float32))
    np.testing.assert_allclose(x.std([1], unbiased=False).numpy(), [2, 4, 1])
    ln = vit.nn.LayerNorm([2], eps=0.0)
    y = ln(x)
    np.testing.assert_allclose(y.mean([1]).numpy(), 0, atol=1e-6)
    np.testing.assert_allclose(y.std([1], unbiased=False).numpy(), 1, atol=1e-6)
    np.testing.assert_allclose(ln.weight.numpy(), [1, 1])


def test_notebook_unfold_patches():
    B, C, S, P = 2, 3, 8, 4
    images = np.random.default_rng(3).standard_normal((B, C, S, S)).astype(np.float32)
    x = vit.Tensor(images)
    patches = x.unfold(2, P, P).unfold(3, P, P)  # (B, C, S/P, S/P, P, P)
    assert patches.shape == (B, C, S // P, S // P, P, P)
    flat = patches.permute([0, 2, 3, 1, 4, 5]).reshape([B, (S // P) ** 2, C * P * P])
    # The same patches by numpy: (p1 p2 c) order of the notebook's rearrangement, row by row.
    expected = images.reshape(B, C, S // P, P, S // P, P).transpose(0, 2, 4, 1, 3, 5).reshape(B, -1, C * P * P)
    np.testing.assert_array_equal(flat.numpy(), expected)


def test_notebook_autograd_example():
    a = vit.Tensor(np.array(2.0), requires_grad=True)
    b = vit.Tensor(np.array(1.0), requires_grad=True)
    c = a + b
    d = b + 1
    e = c * d
    assert e.item() == 6.0
    e.backward()
    assert a.grad.item() == 2.0 and b.grad.item() == 5.0
    assert a.is_leaf and not e.is_leaf and e.grad_fn == "mulBackward"
    assert c.grad is None


def test_set_num_threads_zero_means_every_core():
    before = vit.num_threads()
    try:
        vit.set_num_threads(1)
        assert vit.num_threads() == 1
        vit.set_num_threads(0)  # all cores, not "keep the previous count"
        assert vit.num_threads() == len(os.sched_getaffinity(0))
        with pytest.raises(vit.Error, match=r"\[threads\] the number of threads must be >= 0"):
            vit.set_num_threads(-1)
    finally:
        vit.set_num_threads(before)


def test_train_keywords_are_checked_before_anything_runs_in_their_own_words():
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "never")
        with pytest.raises(vit.Error, match=r"\[train\] hflip: takes true or false, got 'no'"):
            vit.train(out=out, hflip="no")
        with pytest.raises(vit.Error, match=r"\[train\] lr: must be a number, got 'fast'"):
            vit.train(out=out, lr="fast")
        with pytest.raises(vit.Error,
                           match=r"\[train\] batch_size: takes a number, a string or True/False, got a dict"):
            vit.train(out=out, batch_size={})
        with pytest.raises(vit.Error, match=r"\[train\] on_epoch must be a function .*, got a int"):
            vit.train(out=out, on_epoch=5)
        with pytest.raises(vit.Error, match=r"\[train\] precision: must be one of fp32, bf16, got 'fp16'"):
            vit.train(out=out, precision="fp16")
        with pytest.raises(vit.Error, match=r"\[train\] time_budget excludes epochs"):
            vit.train(out=out, time_budget="10m", epochs=2)
        assert not os.path.exists(out)


def test_inputs_that_are_not_a_normalised_float_batch_are_refused_by_name():
    m = vit.load(TIMM, heads=4)
    ref = m.predict(np.full((1, 3, 32, 32), 0.5, np.float32))
    np.testing.assert_array_equal(m.predict(np.full((1, 3, 32, 32), 0.5, np.float64)), ref)  # float64: narrowed
    for dtype in (np.uint8, np.int64, np.bool_, np.complex64):
        with pytest.raises(vit.Error, match=r"\[predict\] the input is an array of .*, not float32"):
            m.predict(np.zeros((1, 3, 32, 32), dtype))
        with pytest.raises(vit.Error, match=r"\[embed\] the input is an array of"):
            m.embed(np.zeros((1, 3, 32, 32), dtype))
    with pytest.raises(vit.Error, match=r"\[predict\] the input is a list, not a numpy array"):
        m.predict([[[[0.5] * 32] * 32] * 3])
    with pytest.raises(vit.Error, match=r"\[predict\] the input is an array of object"):
        m.predict(np.empty((1, 3, 32, 32), object))
    with pytest.raises(vit.Error, match=r"\[image\] the path holds a NUL character"):
        m.load_image(os.path.join(GOLDEN, "preprocess", "coffee.png") + "\0x")
    with pytest.raises(vit.Error, match=r"\[load\] the path holds a NUL character"):
        vit.load(TIMM + "\0x", heads=4)
    with pytest.raises(vit.Error, match=r"\[load\] no path given"):
        vit.load("")
    # Preprocessing overrides, as vit predict's flags.
    with pytest.raises(vit.Error, match=r"\[preprocess\] --std values must be positive"):
        vit.load(TIMM, heads=4, std=[0.0])


def test_ctrl_c_during_train_saves_then_raises_keyboard_interrupt_with_pythons_advice():
    import signal
    with tempfile.TemporaryDirectory() as d:
        write_toy_digits(os.path.join(d, "data"))
        flags = dict(data=os.path.join(d, "data"), out=os.path.join(d, "run"), preset="vit_digits", dim=16, depth=1,
                     heads=2, epochs=3, batch_size=32, plain=True)
        with pytest.raises(KeyboardInterrupt, match=r"saved .*last.safetensors; continue with vit.train\(resume="):
            vit.train(on_epoch=lambda r: os.kill(os.getpid(), signal.SIGINT), **flags)
        assert os.path.exists(os.path.join(d, "run", "last.safetensors"))
        r = vit.train(resume=os.path.join(d, "run"), plain=True)
        assert r["epochs_run"] >= 1


def test_engine_tensors_and_python_operands_fail_as_python_expects():
    t = vit.Tensor(np.array([1.0, 2.0]))
    np.testing.assert_allclose((t * 2 + 1).numpy(), [3.0, 5.0])
    np.testing.assert_allclose((1 - t).numpy(), [0.0, -1.0])
    with pytest.raises(TypeError, match=r"can't multiply sequence by non-int of type 'vit.Tensor'"):
        t * "x"  # Python's own TypeError (NotImplemented, then str's), not pybind11's cast text
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for -: 'vit.Tensor' and 'dict'"):
        t - {}
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for /: 'vit.Tensor' and 'NoneType'"):
        t / None


def test_quantize_errors_name_the_keywords():
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "exists.safetensors")
        open(out, "wb").close()
        with pytest.raises(vit.Error, match=r"\[quantize\] out .* exists \(overwrite replaces it\)"):
            vit.quantize(TIMM, out, heads=4)


def test_bf16_precision_follows_float32():
    x = np.random.default_rng(1).standard_normal((2, 3, 32, 32)).astype(np.float32)
    a = vit.load(TIMM, heads=4).predict(x)
    b = vit.load(TIMM, heads=4, precision="bf16").predict(x)
    cosine = float((a * b).sum() / np.sqrt((a * a).sum() * (b * b).sum()))
    assert cosine >= 0.9999 and not np.array_equal(a, b)
    with pytest.raises(vit.Error, match=r"\[load\] precision: must be one of fp32, bf16, got 'fp16'"):
        vit.load(TIMM, heads=4, precision="fp16")
