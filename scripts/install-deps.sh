#!/usr/bin/env bash
# Installs the Debian 12 packages bulkhead needs to build, test and benchmark.
# Idempotent; prints nothing when everything is already installed. Run as root.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  # LLVM's linker: links the programs and test binaries ~3.5x faster than BFD ld.
  lld
  libprotobuf-dev protobuf-compiler libonnx-dev
  # Debian's oneDNN is built with its OpenCL GPU runtime: its CMake config requires the
  # OpenCL library and headers, which libdnnl-dev only recommends (and we install
  # without recommends).
  libdnnl-dev ocl-icd-opencl-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev
  # `bulkhead serve`: the HTTP library; curl and python3-requests are its tests' clients.
  libcpp-httplib-dev curl python3-requests
  # `bulkhead serve --grpc-port`: gRPC (C++), the code generator for its service, and the
  # Python client the tests call it with.
  libgrpc++-dev protobuf-compiler-grpc python3-grpcio
  # deploy/'s test reads the KServe manifests; the dashboard and the check report are
  # rendered by a real browser in the tests.
  python3-yaml chromium
  # RegexFullMatch's regular expressions; DFT's and STFT's transforms; ImageDecoder's
  # decoders.
  libre2-dev libfftw3-dev
  libjpeg62-turbo-dev libpng-dev libtiff-dev libwebp-dev libopenjp2-7-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  libvulkan-dev glslc mesa-vulkan-drivers vulkan-validationlayers
  # The OpenCL backend plugin (src/backends/opencl) and its tests: PoCL, an OpenCL
  # driver for the CPU (the headers and ICD loader come with ocl-icd-opencl-dev).
  opencl-c-headers pocl-opencl-icd
  # The Python package (pybind11, numpy and pytest for Debian's /usr/bin/python3; onnx
  # for the tests' small models).
  python3-dev pybind11-dev python3-numpy python3-pytest python3-onnx
  # The fuzz harnesses (scripts/fuzz.sh): clang with libFuzzer and the sanitizer runtimes,
  # and the OpenMP runtime clang's -fopenmp links.
  clang libclang-rt-14-dev libomp-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
  echo "install-deps: missing packages: ${missing[*]} (run this script as root)" >&2
  exit 1
fi
echo "install-deps: installing ${#missing[@]} packages (and what they depend on): ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: installed in ${SECONDS}s"
