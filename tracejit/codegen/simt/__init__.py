"""The SIMT targets' code generation: kernel IR -> OpenCL C, CUDA C, MSL and WGSL from one C-style walk, and the
compilers that need no device (NVRTC, the MSL check)."""
