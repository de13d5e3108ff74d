"""Prints the folders of NVIDIA's Python wheels (the `nvidia` namespace package: nvidia/cu13,
nvidia/cublas, nvidia/cuda_runtime, ...) that this python3 imports, one a line, for
scripts/gpu-check.sh to look in for libcublasLt.so.13 (<folder>/lib) and compute-sanitizer
(<folder>/bin). Prints nothing where there are none."""
import os

try:
    import nvidia
except ImportError:
    nvidia = None
for root in getattr(nvidia, "__path__", []):
    for sub in sorted(os.listdir(root)):
        if os.path.isdir(os.path.join(root, sub)):
            print(os.path.join(root, sub))
