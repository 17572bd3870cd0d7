"""The SCI microcode: instruction set, micro-assembler and the protocol program (sci.uasm)."""
