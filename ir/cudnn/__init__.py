"""cudnn: a Python-native graph IR with pluggable execution engines.

This package is split over several source roots (ops/, ir/, router/, engines_*/,
backend_cc/, torch_ops/); extend_path merges them so a Bazel runfiles tree and an
installed wheel import the same way.
"""
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)
