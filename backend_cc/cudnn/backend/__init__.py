"""The cuDNN backend of the cudnn package (backend_cc/).

`cudnn.backend.loader` is the only Python way into the C++ extension
`cudnn._pybind_module`; importing this package loads nothing.
"""
