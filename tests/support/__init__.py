"""Helpers shared by the tests: bus-functional models around the blocks, simulation runs with
optional waveform dumps, random-stimulus generators and the harnesses of larger benches."""
