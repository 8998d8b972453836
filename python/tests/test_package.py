"""The package's layout: its submodules import by name, the engine's classes carry their public
names, and `cmake --install` gives a package that works from the prefix alone (run by ctest:
python.module, with VIT_BUILD_DIR the build tree)."""
import importlib
import os
import subprocess
import sys
import tempfile

import vit


def test_submodules_import_by_their_names():
    import vit.nn
    import vit.nn.functional as F
    import vit.optim
    from vit.nn import Linear, Module, functional
    from vit.optim import SGD, AdamW
    assert vit.nn.Module is Module and vit.nn.Linear is Linear and vit.nn.functional is functional is F
    assert vit.optim.AdamW is AdamW and vit.optim.SGD is SGD
    assert importlib.import_module("vit.nn.functional").cross_entropy is F.cross_entropy
    for name in vit.__all__:
        assert hasattr(vit, name), name
    for module in (vit.nn, vit.nn.functional, vit.optim):
        for name in module.__all__:
            assert hasattr(module, name), module.__name__ + "." + name


def test_the_extension_is_vit_C_and_names_are_public():
    assert vit._C.__name__ == "vit._C" and os.path.dirname(vit._C.__file__) == os.path.dirname(vit.__file__)
    assert vit.Tensor.__module__ == "vit" and vit.Tensor.__name__ == "Tensor"
    assert vit.nn.Linear.__module__ == "vit.nn" and vit.optim.AdamW.__module__ == "vit.optim"
    assert vit.nn.Module.__module__ == "vit.nn" and vit.Size.__module__ == "vit"
    assert vit.Error.__module__ == "vit" and issubclass(vit.Error, RuntimeError)
    assert type(vit.zeros(2).shape) is vit.Size
    assert vit.__version__.count(".") == 2


def test_the_python_parts_are_python_files():
    # What was once Python inside a C++ string is a file: tracebacks and linters see it.
    import vit.nn.module
    assert vit.nn.module.__file__.endswith(os.path.join("vit", "nn", "module.py"))
    try:
        vit.nn.Module()(vit.zeros(1))
    except NotImplementedError as e:
        frames = []
        tb = e.__traceback__
        while tb is not None:
            frames.append(tb.tb_frame.f_code.co_filename)
            tb = tb.tb_next
        assert frames[-1].endswith("module.py"), frames
    else:
        raise AssertionError("Module.forward did not raise")


def test_cmake_install_gives_a_working_package():
    build = os.environ["VIT_BUILD_DIR"]
    with tempfile.TemporaryDirectory() as prefix:
        r = subprocess.run(["cmake", "--install", build, "--component", "python", "--prefix", prefix],
                           capture_output=True, text=True, check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        site = os.path.join(prefix, "lib", "python%d.%d" % sys.version_info[:2], "dist-packages")
        files = sorted(os.path.relpath(os.path.join(d, f), site) for d, _, fs in os.walk(site) for f in fs)
        assert [f for f in files if not f.startswith("vit/_C")] == [
            "vit/__init__.py", "vit/_size.py", "vit/nn/__init__.py", "vit/nn/functional.py", "vit/nn/module.py",
            "vit/optim.py"]
        assert len([f for f in files if f.startswith("vit/_C") and f.endswith(".so")]) == 1
        probe = ("import vit, vit.nn.functional as F; from vit.optim import AdamW; "
                 "x = vit.tensor([[1.0, 2.0]], requires_grad=True); F.cross_entropy(x, [1]).backward(); "
                 "AdamW([x]).step(); print(vit.__file__); print([round(g, 4) for g in x.grad.tolist()[0]])")
        env = dict(os.environ, PYTHONPATH=site, PYTHONDONTWRITEBYTECODE="1")
        r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False, env=env,
                           cwd=prefix)
        assert r.returncode == 0, r.stderr
        where, grad = r.stdout.splitlines()
        assert where == os.path.join(site, "vit", "__init__.py")
        assert grad == "[0.2689, -0.2689]"  # softmax([1, 2]) - one_hot(1)
