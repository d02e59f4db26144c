"""The head-to-head's statistics: the numbers of the bootstrap interval, pinned."""

from kernelseek_suite.headtohead.stats import Sample, median_difference


def test_the_bootstrap_interval_is_pinned_to_its_numbers():
    # pooled kernels across arms, a kernel of a run's own, unpaired seeds, extra measurements, the A/A
    # control's noise: the interval's numbers for a fixed seed stay exactly these
    a = {1: Sample("k1", [1.0, 1.2, 0.9]), 2: Sample(None, [1.1]), 3: 1.05, 4: Sample("k4", [0.8, 0.95]), 6: 1.3}
    b = {
        1: Sample("k6", [1.6, 1.5]),
        2: Sample("k2", [1.4, 1.2, 1.35]),
        3: 1.5,
        5: Sample("k5", [1.25, None]),
        7: None,
        8: Sample("k1", [1.15]),
    }
    extra = {"k1": [1.05, None], "k2": [1.3], "zz": [9.0]}
    iv = median_difference(a, b, "x", "y", extra=extra, resamples=2000, seed=3, noise_sets=[[1.0, 0.9, 1.1]])
    assert (iv.difference, iv.low, iv.high) == (0.27500000000000013, 0.07356132075471712, 0.5984038344491782)
    assert (iv.paired, iv.n_a, iv.n_b, iv.measurements, iv.verdict) == (3, 5, 5, 18, "y higher")
    assert iv.note == "4 run(s) without a partner of the same seed"
    b[1] = Sample("k1", [1.1])  # the kernel of a run of the other arm
    del b[8]
    iv = median_difference(a, b, "x", "y", extra=extra, resamples=2000, seed=3, noise_sets=[[1.0, 0.9, 1.1]])
    assert (iv.difference, iv.low, iv.high, iv.verdict) == (
        0.23750000000000004,
        0.0,
        0.5300399258760101,
        "no significant difference",
    )
    same = median_difference(
        {s: Sample("s", [1.0 + s / 10]) for s in (1, 2, 3)}, {s: Sample("s", [1.0]) for s in (1, 2, 3)}
    )
    assert (same.difference, same.low, same.high, same.identical_kernels) == (0.0, 0.0, 0.0, True)
