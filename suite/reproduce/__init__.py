"""Reproduce the results of one architecture with one command: natively or in the pinned container,
with a preflight (`doctor`), a wheelhouse for air-gapped GPU nodes, and the GEMM ceiling measured
in the same run."""
