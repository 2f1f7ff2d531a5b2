"""The opencl target through pyopencl."""
