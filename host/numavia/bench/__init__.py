"""Benchmarks: each measures on the simulated hardware, with the card's cycle counters, and
writes its figures (Markdown, CSV, JSON, PNG) with the command and configuration that made them."""
