"""The installed package's version, which build keys and firmware carry (base layer, so the
firmware build in ``numavia.soc`` reads it without importing the host tools)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("numavia")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"
