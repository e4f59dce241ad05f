"""The PTX front end: parse what nvcc/NVRTC emit, analyse control flow, map memory ops to source."""
