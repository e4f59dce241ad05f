"""The GPU wing: everything that drives a real GPU. `driver` (is a GPU usable; the driver protocol
and its cuda-bindings and pycuda backends), `params` (kernel parameters as the PTX lays them out),
`device` (`GpuDevice`, the launch script's device with the probes), `run` (the collection run and
`record_kernel_file`), `occupancy` (the device's residency with and without probes), `records`
(the probe buffers and a whole program's record file decoded), `program_run` (a whole program run
under its host runtime, `runtime/`), `calibrate` (the microbenchmarks of `tuiprof calibrate`), and
`ncu` (Nsight Compute found, run and its CSV read).

GPU libraries are imported inside functions only: importing any of these modules needs no driver.
"""
