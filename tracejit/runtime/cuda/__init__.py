"""The cuda target: the driver API, NVRTC compiles, launches."""
