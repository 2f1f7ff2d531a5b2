"""The user-facing surface: @kernel, the traced Tensor, the op namespace and NumPy protocols."""
