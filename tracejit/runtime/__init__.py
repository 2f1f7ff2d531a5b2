"""Devices, buffers, launching, the device registry and discovery."""
