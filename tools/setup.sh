#!/usr/bin/env bash
# Installs what numgate needs to build, where it is missing (Debian 12 / Ubuntu 24.04).
# Nothing is installed when everything is present, so it also works offline.
#   NUMGATE_OFFLINE_DEBS=DIR   install missing packages from .deb files in DIR first
#                              (air-gapped GPU nodes), then apt-get for the rest.
set -euo pipefail

# Tools count as present when they are on PATH however they were installed (pip's cmake too).
declare -A tools=([cmake]=cmake [ninja-build]=ninja [g++]=g++ [python3]=python3 [git]=git)
libraries=(libhdf5-dev libgtest-dev libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev librandom123-dev)

missing=()
for p in "${!tools[@]}"; do
  command -v "${tools[$p]}" >/dev/null || missing+=("$p")
done
for p in "${libraries[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "numgate setup: missing packages: ${missing[*]}"
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then sudo_cmd=(sudo); else
      echo "numgate setup: not root and no sudo: run as root: apt-get install -y ${missing[*]}" >&2
      exit 1
    fi
  fi
  if [ -n "${NUMGATE_OFFLINE_DEBS:-}" ]; then
    # One dpkg call for every .deb there (dependencies included), so dpkg orders them.
    debs=("$NUMGATE_OFFLINE_DEBS"/*.deb)
    if [ -e "${debs[0]}" ]; then
      "${sudo_cmd[@]}" dpkg -i "${debs[@]}" || { echo "numgate setup: dpkg -i of $NUMGATE_OFFLINE_DEBS/*.deb failed" \
        "(missing dependencies? add their .deb files there)" >&2; exit 1; }
    fi
    still=()
    for p in "${missing[@]}"; do
      dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || still+=("$p")
    done
    missing=("${still[@]+"${still[@]}"}")
  fi
  if ((${#missing[@]})); then
    echo "numgate setup: installing with apt-get: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    "${sudo_cmd[@]}" apt-get update -q
    "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
fi

# The CUDA toolkit is not a distribution package here: nvcc must already be installed.
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "numgate setup: nvcc not found (looked on PATH and in /usr/local/cuda/bin)." >&2
  echo "  Install the CUDA Toolkit (13.0 tested) from NVIDIA, then run this again." >&2
  exit 1
fi
echo "numgate setup: all build dependencies present"
