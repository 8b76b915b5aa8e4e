"""The release of this package (tools/bzl/package.bzl's VERSION; a test keeps them equal)."""

__version__ = "0.1.0"
