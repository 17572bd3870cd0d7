"""Benchmarks: each measures on the simulated hardware, with the card's cycle counters, and
writes its figures (Markdown, CSV, JSON, PNG) with the command and configuration that made them."""

#: The Ethernet PHY+cable delay the benchmarks model unless told otherwise, in 125 MHz cycles
#: (400 ns: a GbE PHY on each side and a few metres of cable).
ETH_DELAY_CYCLES = 50
