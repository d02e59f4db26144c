"""kernelseek-suite: check and extend question-driven GPU kernel optimization claims."""

__version__ = "0.1.0"
