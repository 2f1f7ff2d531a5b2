"""DLPack export of device memory: a "dltensor" PyCapsule holding a DLManagedTensor (DLPack 0.8 ABI,
which NumPy, PyTorch, CuPy and JAX all accept), built with ctypes. The capsule keeps the producer's
memory alive until the consumer calls the deleter, or until the capsule dies unconsumed."""

from __future__ import annotations

import ctypes

import numpy as np

CPU, CUDA = 1, 2  # DLDeviceType
_CODES = {"i": 0, "u": 1, "f": 2, "b": 6}
_BFLOAT = 4  # kDLBfloat: ml_dtypes.bfloat16 (torch.bfloat16), which NumPy itself cannot export


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _Deleter)]

_NAME = b"dltensor"
_live: dict[int, tuple] = {}  # address of a DLManagedTensor -> what must stay alive until its deleter runs

_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_is_valid.restype = ctypes.c_int
_is_valid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]  # raw pointers: a dying capsule must not be revived
_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]


@_Deleter
def _delete(managed) -> None:
    _live.pop(ctypes.addressof(managed.contents), None)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule: int) -> None:
    """A capsule that died still named "dltensor" was never consumed: release its memory here."""
    if _is_valid(capsule, _NAME):
        _live.pop(_get_pointer(capsule, _NAME), None)


def export(ptr: int, shape, strides_bytes, dtype: np.dtype, device_type: int, device_id: int, owner):
    """A DLPack capsule over `ptr` (shape, byte strides, dtype); `owner` stays alive while it is in use."""
    dtype = np.dtype(dtype)
    code = _BFLOAT if dtype.name == "bfloat16" else _CODES.get(dtype.kind)
    if code is None:
        raise BufferError(f"{dtype} has no DLPack type code (of the ml_dtypes types, only bfloat16 has one)")
    ndim = len(shape)
    shape_arr = (ctypes.c_int64 * max(ndim, 1))(*shape)
    strides_arr = (ctypes.c_int64 * max(ndim, 1))(*(s // dtype.itemsize for s in strides_bytes))
    managed = DLManagedTensor()
    t = managed.dl_tensor
    t.data, t.device, t.ndim = ptr or None, DLDevice(device_type, device_id), ndim
    t.dtype = DLDataType(code, 8 * dtype.itemsize, 1)
    t.shape = ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(strides_arr, ctypes.POINTER(ctypes.c_int64))
    t.byte_offset = 0
    managed.deleter = _delete
    address = ctypes.addressof(managed)
    _live[address] = (managed, shape_arr, strides_arr, owner)
    return _new_capsule(address, _NAME, ctypes.cast(_capsule_destructor, ctypes.c_void_p))


def through_host(device: str, host: np.ndarray, stream=None, max_version=None, dl_device=None, copy=None):
    """The DLPack export of an array in memory no other library can address (OpenCL, WebGPU, Metal): `host`, its
    copy on the host, exported as NumPy exports it. copy=False (the consumer forbids a copy) is refused."""
    if copy is False:
        raise BufferError(
            f"a tj.Array on {device} is in memory that NumPy and torch cannot address: DLPack can give only a copy "
            "on the host, and copy=False forbids one"
        )
    if dl_device is not None and int(dl_device[0]) != CPU:
        raise BufferError(f"a tj.Array on {device} can be exported to the host (DLPack device CPU) only")
    return of_host(host, max_version)


def of_host(host: np.ndarray, max_version=None):
    """A host array's DLPack export: NumPy's own, or tracejit's for bfloat16 (which NumPy has no code for)."""
    if host.dtype.kind == "V":  # ml_dtypes' types
        return export(host.ctypes.data, host.shape, host.strides, host.dtype, CPU, 0, host)
    return host.__dlpack__() if max_version is None else host.__dlpack__(max_version=max_version)
