#!/usr/bin/env bash
# Download, on a machine with a package index, the wheels a GPU node without one needs for the
# multi-GPU bench (scripts/multi-gpu-bench.sh): the fa3-fwd wheel (FA3 forward) and the Dask stack
# with dask-cuda. They go to .whl/ (git-ignored). numpy, pandas and the dashboard's packages are left
# out: the node's torch brings numpy, and nothing here imports the others.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
PYVER=${PYVER:-3.12}
dest=.whl
mkdir -p "$dest"
platform=(--only-binary=:all: --python-version "$PYVER" --implementation cp
          --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
          --platform manylinux2014_x86_64)
"$PY" -m pip download -q --no-deps "${platform[@]}" -d "$dest" fa3-fwd==0.0.3
"$PY" -m pip download -q "${platform[@]}" -d "$dest" "dask-cuda>=26.10" "nvidia-ml-py>=12"
for skip in numpy pandas bokeh pillow contourpy xyzservices narwhals tzdata python_dateutil six; do
  rm -f "$dest"/${skip}-*.whl
done
du -sh "$dest"
ls "$dest"
