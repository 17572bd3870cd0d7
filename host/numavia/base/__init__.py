"""The bottom layer: errors, defaults, the build cache and the one-source definitions
(register map, packet formats, descriptor layouts) with their generators."""
