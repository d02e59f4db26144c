"""The timing decisions that need no GPU (the measurement itself is a GPU test)."""
import pytest

from kernelseek_suite.config import TimingConfig
from kernelseek_suite.harness.timing import TimingStats, late_work, summarize


def test_summarize():
    st = summarize([3.0, 1.0, 2.0, 4.0, 10.0], [0.0, 0.01, 0.0, 0.02, 0.0])
    assert (st.median_ms, st.min_ms, st.max_ms, st.reps) == (3.0, 1.0, 10.0, 5)
    assert st.iqr_ms > 0 and st.late_ms == 0.0
    assert summarize([2.0]).iqr_ms == 0.0


@pytest.mark.parametrize("median,late,flag", [
    (1.0, 0.01, False),       # noise after an honest call
    (1.0, 0.2, False),        # under 25% of the call: not enough to tell
    (1.0, 0.3, True),         # work left running after the call
    (0.005, 0.9, True),       # a call that returns at once and leaves all its work behind
    (0.1, 0.04, False),       # under the absolute floor
])
def test_late_work(median, late, flag):
    assert late_work(TimingStats(median, median, median, 0.0, 5, late), TimingConfig()) is flag
