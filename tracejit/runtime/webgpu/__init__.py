"""The webgpu target through wgpu-py."""
