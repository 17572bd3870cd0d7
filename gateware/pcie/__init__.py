"""PCIe endpoint at the transaction layer: the card as a PCIe function (see docs/pcie.md)."""
