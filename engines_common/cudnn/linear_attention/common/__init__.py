"""What the linear-attention engines share: the facts record they gate on (facts.py), the
feature and kernel-dtype gates written against it (feature_gates.py, port_dtypes.py) and
caller buffers and streams as torch objects (torch_buffers.py). Importing it loads
neither torch nor any kernel library."""
