"""The GPU window's preparation (issue 41), all of it run and tested on a machine without a GPU:

- ``launches``: the device kernels' launches, recorded while the device tests and the GPU
  benchmark run in Triton's CPU interpreter;
- ``cache``: those launches compiled ahead for the GPU machine's Triton and architecture, into
  a Triton cache that travels with the run, so the lent GPU loads kernels instead of compiling
  them;
- ``session``: the one prepared device command (facts, the device tests in order of evidence,
  the benchmark), every result saved the moment it exists;
- ``rerun``: what the last session left failed or unrun, for a second call.
"""
