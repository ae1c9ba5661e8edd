"""The WGSL back end: WebGPU compute shaders from SIMT IR (codegen.py) and the checks WebGPU needs that
naga does not make (checks.py). tilec.runtime.wgsl runs the result through wgpu."""
