"""The card's gateware, in Amaranth. ``regmap`` (and the other interface definitions) import no
Amaranth, so host tools can use them without the HDL toolchain."""
