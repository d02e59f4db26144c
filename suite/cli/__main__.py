"""`python -m kernelseek_suite.cli ...`: the same as `kernelseek-suite ...`."""

from . import main

main(prog_name="kernelseek-suite")
