#!/usr/bin/env bash
# Download, on this machine, the wheels the GPU machine lacks (its image has torch, Lightning, pluggy, rich, tabulate,
# networkx, scipy, filelock; not jsonschema and its helpers, nor mambapy) into .whl/, which git ignores. The device
# call carries .whl (benchmark/gpu/README.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
exclude=$(git rev-parse --git-path info/exclude)  # a worktree's or a fresh clone's info/ may not exist yet
mkdir -p "$(dirname "$exclude")"
grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >> "$exclude"
mkdir -p .whl
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
for spec in "jsonschema==4.23.0" "jsonschema-specifications==2024.10.1" "referencing==0.35.1" "rpds-py==0.22.3" \
            "mambapy==1.2.0"; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]}" -d .whl "$spec"
done
ls .whl
