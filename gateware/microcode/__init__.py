"""The remote access controller's microcode: instruction set, assembler, simulator, source."""
