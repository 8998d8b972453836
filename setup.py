"""`pip install .`: builds the Python package `vit` (python/vit/*.py over the extension vit._C, which
CMake builds) and installs both.

Uses only what Debian ships: python3-pip, python3-setuptools, pybind11-dev, python3-dev, cmake,
ninja-build and the libraries scripts/setup.sh installs; no network, so pass
--no-build-isolation (pip then uses the system's setuptools instead of downloading one):

    /usr/bin/python3 -m venv --system-site-packages .venv   # Debian's Python: numpy from python3-numpy
    .venv/bin/pip install --no-build-isolation .
    .venv/bin/python -c "import vit; print(vit.__doc__)"

The module is built portable (VIT_NATIVE=OFF: the kernels pick AVX2 / AVX-512 / VNNI / BF16 at
run time), as the C++ package is, so it runs on any x86-64 machine with the same libraries.
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).parent.resolve()


def project_version():
    text = (ROOT / "CMakeLists.txt").read_text()
    return re.search(r"project\(vit VERSION ([0-9.]+)", text).group(1)


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        target = pathlib.Path(self.get_ext_fullpath(ext.name)).resolve()
        build = pathlib.Path(self.build_temp).resolve() / "cmake"
        build.mkdir(parents=True, exist_ok=True)
        configure = ["cmake", "-S", str(ROOT), "-B", str(build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                     "-DVIT_NATIVE=OFF", "-DVIT_PYTHON=ON", f"-DPython_EXECUTABLE={sys.executable}"]
        subprocess.check_call(configure)
        jobs = str(os.cpu_count() or 1)
        subprocess.check_call(["cmake", "--build", str(build), "--target", "vit_python", "-j", jobs])
        built = sorted((build / "python" / "vit").glob("_C*.so"))
        if not built:
            raise RuntimeError(f"the CMake build made no extension in {build / 'python' / 'vit'} "
                               "(are pybind11-dev and python3-dev installed? scripts/setup.sh installs them)")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built[0], target)


setup(
    name="vit",
    version=project_version(),
    description="Vision Transformers in C++: training, fine-tuning and inference (the Python package)",
    packages=["vit", "vit.nn"],
    package_dir={"": "python"},
    ext_modules=[CMakeExtension("vit._C")],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
    python_requires=">=3.9",
)
