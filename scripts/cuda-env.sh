# Sourced by the build scripts: put the CUDA toolkit's nvcc on PATH when it is installed in the
# usual place but not on PATH, so FP8A_WITH_CUDA=AUTO can find it.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
