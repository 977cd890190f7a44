#!/usr/bin/env bash
# Install the Debian packages the tests use, if they are missing.
set -euo pipefail
need=()
dpkg -s libonnx-testdata >/dev/null 2>&1 || need+=(libonnx-testdata)
command -v dot >/dev/null 2>&1 || need+=(graphviz)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
[ -f /usr/include/simde/x86/avx512.h ] || need+=(libsimde-dev) # make test-avx512
[ ${#need[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
