"""Reading a DLPack capsule's device pointer, dtype, shape and strides (any producer: JAX, cupy,
torch, ...) with ctypes — no dependency on the producer's library."""

from __future__ import annotations

import ctypes

K_DL_CUDA = 2
K_DL_CUDA_MANAGED = 13
_CODES = {0: "i", 1: "u", 2: "f", 4: "bf", 6: "b"}  # DLDataTypeCode: int, uint, float, bfloat, bool


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def describe(obj, stream: int | None = None) -> dict | None:
    """{'ptr', 'device_type', 'device_id', 'dtype' (e.g. 'f16', 'bf16'), 'shape', 'contiguous'} of a
    DLPack exporter, or None if obj is not one. The capsule is only read (not consumed), and `obj`
    keeps the memory alive while the caller holds it. `stream` is the CUstream the consumer will use
    the data on (the DLPack stream protocol: the producer orders its pending work before it; None or
    0 mean the legacy default stream, which the protocol spells 1)."""
    if not hasattr(obj, "__dlpack__"):
        return None
    device = getattr(obj, "__dlpack_device__", None)
    on_cuda = device is not None and device()[0] in (K_DL_CUDA, K_DL_CUDA_MANAGED)
    try:  # the stream argument is for CUDA producers only (a host producer must get None)
        capsule = obj.__dlpack__(stream=stream or 1) if on_cuda else obj.__dlpack__()
    except TypeError:  # a producer older than the stream protocol
        capsule = obj.__dlpack__()
    t = ctypes.cast(_get_pointer(capsule, b"dltensor"), ctypes.POINTER(_DLManagedTensor)).contents.dl_tensor
    shape = [t.shape[i] for i in range(t.ndim)]
    contiguous = True
    if t.strides:
        expect = 1
        for i in reversed(range(t.ndim)):
            if shape[i] != 1 and t.strides[i] != expect:
                contiguous = False
            expect *= shape[i]
    code = _CODES.get(t.dtype.code, "?")
    dtype = "bool" if code == "b" else f"{code}{t.dtype.bits}"
    return {"ptr": (t.data or 0) + t.byte_offset, "device_type": t.device.device_type,
            "device_id": t.device.device_id, "dtype": dtype,
            "shape": shape, "contiguous": contiguous}
