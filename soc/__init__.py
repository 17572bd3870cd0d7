"""The LiteX SoC around the card: VexRiscv, RAM, UART, timer and the card, plus its targets."""
