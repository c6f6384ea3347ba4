"""Triton kernels written for kernscope's built-in benchmark operators (imported only on GPU)."""
