"""What the profiling tools see in a kernel: Nsight Compute's metrics (ncu.py) and the SASS that
cuobjdump prints (sass.py), each parsed into typed results and a compact table. The parsers read
text; running the tools is left to the caller (the tool-rich agent's tools, a person)."""
