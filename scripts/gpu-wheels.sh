#!/usr/bin/env bash
# Download, here (with the package registries), the wheels that `make gpu-check` carries to a GPU
# machine that has no network: the app's own dependencies from pyproject.toml that the GPU image
# lacks, with everything they need, built for that machine's Python (CPython 3.12, x86-64 Linux).
# torch, torchvision, pandas, jinja2 and nvidia-ml-py are on the image already and stay there.
#   GPU_PY_VERSION=3.12 bash scripts/gpu-wheels.sh [DEST]    (default DEST: .gpu-wheels)
set -euo pipefail
cd "$(dirname "$0")/.."
dest="${1:-.gpu-wheels}"
version="${GPU_PY_VERSION:-3.12}"
python="${PYTHON:-python3}"
test -x .venv/bin/python && python=.venv/bin/python

# The [project] dependencies, less what the image has and what only older Pythons need.
mapfile -t wanted < <("$python" - <<'PY'
import re, tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
on_image = {"pandas", "jinja2", "tomli"}
for dep in deps:
    name = re.split(r"[<>=!~;\[ ]", dep, maxsplit=1)[0].lower()
    if name not in on_image:
        print(dep.split(";")[0].strip())
PY
)
rm -rf "$dest"
mkdir -p "$dest"
platforms=()
for p in manylinux_2_39 manylinux_2_35 manylinux_2_34 manylinux_2_28 manylinux_2_27 manylinux_2_26 \
         manylinux_2_24 manylinux_2_17 manylinux2014 manylinux1; do
    platforms+=(--platform "${p}_x86_64")
done
"$python" -m pip download -q --only-binary=:all: --implementation cp \
    --python-version "$version" "${platforms[@]}" -d "$dest" "${wanted[@]}"
# Lightning, for the check's Lightning script: the pin of pyproject.toml's frameworks extra and what
# it needs besides torch, numpy, packaging and typing-extensions (on the image; --no-deps, so
# that pip does not fetch a torch of its own).
lightning=$("$python" - <<'PY'
import tomllib
extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
print(next(d for d in extra["frameworks"] if d.startswith("pytorch-lightning")))
PY
)
"$python" -m pip download -q --only-binary=:all: --implementation cp --no-deps \
    --python-version "$version" "${platforms[@]}" -d "$dest" \
    "$lightning" lightning-utilities torchmetrics fsspec pyyaml tqdm
# The check carries these only into this Python version (a cp312 wheel installs nowhere else).
echo "$version" > "$dest/python-version"
echo "gpu-wheels: ${#wanted[@]} requirements (${wanted[*]}) -> $(ls "$dest"/*.whl | wc -l) wheels in $dest:"
ls "$dest"/*.whl
