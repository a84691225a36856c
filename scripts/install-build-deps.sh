#!/usr/bin/env bash
# What building llama.cpp (the local chat model's engine, crate llama-cpp-sys-2) needs besides
# the Rust toolchain and a C++ compiler: cmake, and libclang for its generated bindings.
# Installed from Debian's packages when missing; idempotent.
set -euo pipefail
have_libclang() {
    ldconfig -p 2>/dev/null | grep -q 'libclang\(-[0-9.]*\)\?\.so' ||
        compgen -G '/usr/lib/llvm-*/lib/libclang.so*' >/dev/null
}
if command -v cmake >/dev/null && have_libclang; then
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "error: building llama.cpp needs cmake and libclang (Debian/Ubuntu: apt-get install" \
        "cmake libclang-dev; Fedora: dnf install cmake clang-devel; macOS: brew install cmake llvm)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq cmake libclang-dev >/dev/null ||
    { apt-get update -qq && apt-get install -y -qq cmake libclang-dev >/dev/null; }
