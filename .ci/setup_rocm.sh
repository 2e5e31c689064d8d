#!/usr/bin/env bash
# Make FlyDSL able to compile real AMDGPU code objects on a CPU-only Debian 12 machine.
#
# FlyDSL's ROCm backend links with `ld.lld` and pulls the AMDGPU device bitcode (ocml/ockl)
# from one root: $ROCM_PATH/llvm/bin/ld.lld and $ROCM_PATH/amdgcn/bitcode. Debian ships both
# as `lld-19` and `rocm-device-libs`; this script installs them and builds that root out of
# symlinks. Idempotent: a second run only re-checks.
#
# Usage:  .ci/setup_rocm.sh [ROOT]        (default ROOT: $FLYDEPS_ROCM_ROOT or /opt/flydeps-rocm)
# Then:   export ROCM_PATH=ROOT ARCH=gfx942
# The test suite's conftest finds the default root by itself.
set -euo pipefail

ROOT="${1:-${FLYDEPS_ROCM_ROOT:-/opt/flydeps-rocm}}"
LLD=/usr/bin/ld.lld-19
BITCODE=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode

SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then
    SUDO=sudo
fi

if [ ! -x "$LLD" ] || [ ! -d "$BITCODE" ]; then
    $SUDO apt-get update
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y lld-19 rocm-device-libs
fi

for need in "$LLD" "$BITCODE/ocml.bc"; do
    if [ ! -e "$need" ]; then
        echo "setup_rocm: $need is missing after installing lld-19 and rocm-device-libs" >&2
        exit 1
    fi
done

$SUDO mkdir -p "$ROOT/llvm/bin" "$ROOT/amdgcn"
$SUDO ln -sf "$LLD" "$ROOT/llvm/bin/ld.lld"
$SUDO ln -sfn "$BITCODE" "$ROOT/amdgcn/bitcode"

echo "ROCM_PATH=$ROOT"
