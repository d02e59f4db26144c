"""Device and stream state put back after every call of the kernel (harness/device_state.py): the
logic with a stand-in driver on the CPU, and the real driver on a GPU."""

import pytest

from kernelseek_suite.harness import device_state as D

HARNESS_STREAM = 0x5000


class StandInDriver:
    """The driver's state as plain numbers, and a log of what was called."""

    def __init__(self, limits=None, windows=None, sticky=()):
        self.limits = {code: 0 for code in D.LIMITS.values()}
        self.limits.update({1: 1 << 20, 2: 8 << 20, 3: 2, 4: 2048, 5: 64, D.PERSISTING_L2: 1 << 20})
        self.limits.update(limits or {})
        self.windows = {HARNESS_STREAM: 0, D.CU_STREAM_LEGACY: 0, D.CU_STREAM_PER_THREAD: None}
        self.windows.update(windows or {})
        self.cache = 0
        self.sticky = set(sticky)  # limits that do not change when set (a broken restore)
        self.resets = 0

    def get_limit(self, which):
        if which not in self.limits:
            raise D.DeviceStateError(f"limit {which} not supported")
        return self.limits[which]

    def set_limit(self, which, value):
        if which not in self.sticky:
            self.limits[which] = value

    def window_bytes(self, stream):
        return self.windows[stream]

    def clear_window(self, stream):
        self.windows[stream] = 0

    def cache_config(self):
        return self.cache

    def set_cache_config(self, value):
        self.cache = value

    def reset_persisting_l2(self):
        self.resets += 1


STREAMS = [HARNESS_STREAM, D.CU_STREAM_LEGACY, D.CU_STREAM_PER_THREAD]


def test_the_start_sets_the_persisting_set_aside_to_zero_and_clears_windows():
    d = StandInDriver(windows={HARNESS_STREAM: 4096})
    g = D.DeviceGuard(d, STREAMS)
    assert d.limits[D.PERSISTING_L2] == 0 and d.windows[HARNESS_STREAM] == 0 and d.resets == 1
    assert g.limits["the persisting-L2 set-aside (cudaLimitPersistingL2CacheSize)"] == 0
    assert g.check_and_restore() == [] and g.changed == [] and d.resets == 2  # reset after every call


def test_a_persisting_window_and_set_aside_are_found_put_back_and_the_lines_reset():
    d = StandInDriver()
    g = D.DeviceGuard(d, STREAMS)
    d.limits[D.PERSISTING_L2] = 30 << 20  # what the kernel did in its call
    d.windows[HARNESS_STREAM] = 1 << 24
    found = g.check_and_restore()
    assert len(found) == 2 and "persisting-L2 set-aside" in found[0] and "0 -> 31457280" in found[0]
    assert "access-policy window of 16777216 bytes on the harness's stream" in found[1]
    assert d.limits[D.PERSISTING_L2] == 0 and d.windows[HARNESS_STREAM] == 0 and d.resets == 2
    assert g.check_and_restore() == [] and g.changed == found  # kept, not repeated


@pytest.mark.parametrize("code", sorted(set(D.LIMITS.values()) - {D.PERSISTING_L2}))
def test_every_other_limit_is_restored_to_its_value_at_start(code):
    d = StandInDriver()
    g = D.DeviceGuard(d, STREAMS)
    start = d.limits[code]
    d.limits[code] = start + 12345
    [found] = g.check_and_restore()
    assert d.limits[code] == start and str(start + 12345) in found


def test_windows_on_the_default_streams_and_the_cache_configuration_count_too():
    d = StandInDriver()
    g = D.DeviceGuard(d, STREAMS)
    d.windows[D.CU_STREAM_LEGACY] = 512
    d.cache = 2
    found = g.check_and_restore()
    assert any("legacy default stream" in f for f in found) and any("cache configuration" in f for f in found)
    assert d.windows[D.CU_STREAM_LEGACY] == 0 and d.cache == 0


def test_a_limit_that_does_not_go_back_stops_the_worker():
    d = StandInDriver(sticky={2})
    g = D.DeviceGuard(d, STREAMS)
    d.limits[2] = 1 << 30
    with pytest.raises(D.DeviceStateError):
        g.check_and_restore()


def test_a_limit_the_device_does_not_have_is_not_watched():
    d = StandInDriver()
    del d.limits[3]
    g = D.DeviceGuard(d, STREAMS)
    assert g.unsupported == ["the device runtime sync depth"] and g.check_and_restore() == []


def test_a_set_aside_that_does_not_go_to_zero_stops_the_worker():
    with pytest.raises(D.DeviceStateError):
        D.DeviceGuard(StandInDriver(sticky={D.PERSISTING_L2}), STREAMS)


def test_the_stack_size_is_left_to_the_driver():
    assert 0 not in D.LIMITS.values()  # CU_LIMIT_STACK_SIZE: the driver raises it by itself


@pytest.mark.gpu
def test_the_real_driver_sees_and_restores_a_persisting_window():
    import ctypes

    import torch

    torch.cuda.init()
    s = torch.cuda.Stream()
    drv = D.CudaDriver()
    g = D.DeviceGuard(drv, [s.cuda_stream, D.CU_STREAM_LEGACY])
    assert g.check_and_restore() == []
    assert drv.lib.cuCtxSetLimit(ctypes.c_int(D.PERSISTING_L2), ctypes.c_size_t(4 << 20)) == 0
    x = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    buf = ctypes.create_string_buffer(64)
    ctypes.memmove(buf, ctypes.byref(ctypes.c_void_p(x.data_ptr())), 8)
    ctypes.memmove(ctypes.addressof(buf) + 8, ctypes.byref(ctypes.c_size_t(1 << 20)), 8)
    ctypes.memmove(ctypes.addressof(buf) + 16, ctypes.byref(ctypes.c_float(1.0)), 4)
    ctypes.memmove(ctypes.addressof(buf) + 20, ctypes.byref(ctypes.c_int(2)), 4)  # persisting
    assert drv.lib.cuStreamSetAttribute(ctypes.c_void_p(s.cuda_stream), ctypes.c_int(1), buf) == 0
    found = g.check_and_restore()
    assert len(found) == 2 and drv.get_limit(D.PERSISTING_L2) == 0 and not drv.window_bytes(s.cuda_stream)
