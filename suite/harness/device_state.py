"""Device and stream state a kernel could change to sway what is timed after it, checked after every
call of the kernel and put back before anything else runs.

- the persisting-L2 set-aside (`cudaLimitPersistingL2CacheSize`) is held at 0, and the lines kept
  in it are reset after every call (`cuCtxResetPersistingL2Cache`): with a set-aside, data marked
  persisting survives the harness's L2 flush, so a kernel could keep its inputs warm from one call
  to the next (the reset also covers a kernel that raises the set-aside and lowers it again within
  its call);
- access-policy windows on the streams the harness uses (its own stream, the legacy and per-thread
  default streams) are cleared;
- the other context limits (printf FIFO, malloc heap, device-runtime depth and pending launches, L2
  fetch granularity) and the cache configuration are restored to what they were when the worker
  started, and read back to check that they took.

Not the stack-size limit: the driver raises it by itself when a kernel needs more local memory, and
lowering it again would make the next call pay for raising it inside the timed region.

The kernel cannot call any of this (imports.py refuses these functions at build); this is the net
under that rule. Anything found changed rejects the kernel (`device-state`). The driver is reached
through `libcuda` with ctypes (`CudaDriver`); the logic is tested on the CPU with a stand-in.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Protocol

# CUlimit (cuda.h)
LIMITS = {
    "the printf FIFO size": 1,
    "the device malloc heap size": 2,
    "the device runtime sync depth": 3,
    "the device runtime pending launch count": 4,
    "the maximum L2 fetch granularity": 5,
    "the persisting-L2 set-aside (cudaLimitPersistingL2CacheSize)": 6,
}
PERSISTING_L2 = 6
PERSISTING_NAME = next(name for name, code in LIMITS.items() if code == PERSISTING_L2)
CU_STREAM_LEGACY, CU_STREAM_PER_THREAD = 0x1, 0x2
ACCESS_POLICY_WINDOW = 1  # CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW (a stream attribute too)


class Driver(Protocol):
    def get_limit(self, which: int) -> int: ...
    def set_limit(self, which: int, value: int) -> None: ...
    def window_bytes(self, stream: int) -> int | None: ...  # None: the stream has no such attribute
    def clear_window(self, stream: int) -> None: ...
    def cache_config(self) -> int: ...
    def set_cache_config(self, value: int) -> None: ...
    def reset_persisting_l2(self) -> None: ...


class DeviceStateError(RuntimeError):
    """The harness could not put the device's state back: nothing timed after it would be fair."""


class DeviceGuard:
    def __init__(self, driver: Driver, streams: list[int]):
        self.driver, self.streams = driver, list(streams)
        driver.set_limit(PERSISTING_L2, 0)
        driver.reset_persisting_l2()
        for s in self.streams:
            if driver.window_bytes(s):
                driver.clear_window(s)
        # the limits this device has (one it does not support, a kernel cannot change either)
        self.limits: dict[str, int] = {}
        self.unsupported: list[str] = []
        for name, code in LIMITS.items():
            try:
                self.limits[name] = driver.get_limit(code)
            except DeviceStateError:
                self.unsupported.append(name)
        if self.limits.get(PERSISTING_NAME, 0) != 0:
            raise DeviceStateError("the persisting-L2 set-aside could not be set to 0")
        self.cache = driver.cache_config()
        self.changed: list[str] = []  # everything found changed so far, in words

    def check_and_restore(self) -> list[str]:
        """What the last call changed (in words), after putting it back. Also kept in `changed`."""
        d, found = self.driver, []
        for name, code in LIMITS.items():
            if name not in self.limits:
                continue
            now = d.get_limit(code)
            if now != self.limits[name]:
                found.append(f"{name}: {self.limits[name]} -> {now}")
                d.set_limit(code, self.limits[name])
                if d.get_limit(code) != self.limits[name]:
                    raise DeviceStateError(f"{name} could not be set back to {self.limits[name]}")
        for s in self.streams:
            n = d.window_bytes(s)
            if n:
                found.append(f"an access-policy window of {n} bytes on {_stream_name(s)}")
                d.clear_window(s)
                if d.window_bytes(s):
                    raise DeviceStateError(f"the access-policy window on {_stream_name(s)} could not be cleared")
        now = d.cache_config()
        if now != self.cache:
            found.append(f"the cache configuration: {self.cache} -> {now}")
            d.set_cache_config(self.cache)
        # always: a kernel could raise the set-aside and lower it again within its call, leaving lines
        # marked persisting behind
        d.reset_persisting_l2()
        self.changed += [f for f in found if f not in self.changed]
        return found


def _stream_name(s: int) -> str:
    return {CU_STREAM_LEGACY: "the legacy default stream", CU_STREAM_PER_THREAD: "the per-thread default stream"}.get(
        s, "the harness's stream"
    )


class CudaDriver:
    """The CUDA driver API through ctypes, on the context current on this thread (torch's)."""

    _VALUE_BYTES = 64  # CUstreamAttrValue / CUlaunchAttributeValue: a 64-byte union

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")

    def _call(self, name: str, *args) -> int:
        return getattr(self.lib, name)(*args)

    def _ok(self, name: str, *args) -> None:
        rc = self._call(name, *args)
        if rc != 0:
            raise DeviceStateError(f"{name} failed with CUresult {rc}")

    def get_limit(self, which: int) -> int:
        v = ctypes.c_size_t()
        self._ok("cuCtxGetLimit", ctypes.byref(v), ctypes.c_int(which))
        return v.value

    def set_limit(self, which: int, value: int) -> None:
        self._ok("cuCtxSetLimit", ctypes.c_int(which), ctypes.c_size_t(value))

    def window_bytes(self, stream: int) -> int | None:
        buf = ctypes.create_string_buffer(self._VALUE_BYTES)
        if self._call("cuStreamGetAttribute", ctypes.c_void_p(stream), ctypes.c_int(ACCESS_POLICY_WINDOW), buf) != 0:
            return None
        return struct.unpack_from("<Q", buf.raw, 8)[0]  # {void* base_ptr; size_t num_bytes; ...}

    def clear_window(self, stream: int) -> None:
        buf = ctypes.create_string_buffer(self._VALUE_BYTES)  # num_bytes 0, hit ratio 0, normal
        self._ok("cuStreamSetAttribute", ctypes.c_void_p(stream), ctypes.c_int(ACCESS_POLICY_WINDOW), buf)

    def cache_config(self) -> int:
        v = ctypes.c_int()
        self._ok("cuCtxGetCacheConfig", ctypes.byref(v))
        return v.value

    def set_cache_config(self, value: int) -> None:
        self._ok("cuCtxSetCacheConfig", ctypes.c_int(value))

    def reset_persisting_l2(self) -> None:
        self._ok("cuCtxResetPersistingL2Cache")
