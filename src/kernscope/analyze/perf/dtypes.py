"""Element types as Kineto writes them (``Input type``): bytes per element and the precision whose peak applies."""

from __future__ import annotations

#: Kineto ``Input type`` string (lower case) -> (bytes per element, precision key of the peaks table)
_TYPES: dict[str, tuple[int, str]] = {
    "double": (8, "fp64"),
    "float": (4, "fp32"),
    "c10::half": (2, "fp16"),
    "c10::bfloat16": (2, "bf16"),
    "c10::float8_e4m3fn": (1, "fp8"),
    "c10::float8_e4m3fnuz": (1, "fp8"),
    "c10::float8_e5m2": (1, "fp8"),
    "c10::float8_e5m2fnuz": (1, "fp8"),
    "c10::float8_e8m0fnu": (1, "fp8"),
    "c10::float4_e2m1fn_x2": (1, "fp4"),
    "long int": (8, "int64"),
    "long": (8, "int64"),
    "int": (4, "int32"),
    "short int": (2, "int16"),
    "short": (2, "int16"),
    "signed char": (1, "int8"),
    "unsigned char": (1, "int8"),
    "bool": (1, "bool"),
    "c10::complex<float>": (8, "fp32"),
    "c10::complex<double>": (16, "fp64"),
    "c10::complex<c10::half>": (4, "fp16"),
}

#: GEMM kernels on TF32 tensor cores, by name: cuBLAS's ``..._tf32f32_...``/``..._tf32_...``, CUTLASS's Ampere
#: ``s1688gemm`` (a float GEMM on TF32 MMA; SIMT float kernels are ``sgemm``). A regex for polars.
TF32_KERNELS = r"(?i)tf32|s1688"

#: the element type of a fused optimizer's tensor lists, from its kernel's name (the profile records a list's shapes,
#: not its type): ``FusedAdamMathFunctor<c10::BFloat16, 4, ...>`` (Adam, AdamW), ``FusedSgdMathFunctor<float, ...>``.
#: A regex for polars; group 1 is a Kineto type name
FUSED_OPTIMIZER_TYPE = r"Fused\w*MathFunctor<(c10::BFloat16|c10::Half|float|double)\b"

#: ``torch.dtype`` numbers (``ScalarType``) as they appear in ``Concrete Inputs`` (e.g. ``aten::to``'s dtype)
SCALAR_TYPES: dict[int, str] = {
    0: "unsigned char", 1: "signed char", 2: "short int", 3: "int", 4: "long int", 5: "c10::Half", 6: "float",
    7: "double", 9: "c10::complex<float>", 10: "c10::complex<double>", 11: "bool", 15: "c10::BFloat16",
    23: "c10::Float8_e5m2", 24: "c10::Float8_e4m3fn", 25: "c10::Float8_e5m2fnuz", 26: "c10::Float8_e4m3fnuz",
}


def bytes_per_element(dtype: str | None) -> int | None:
    """Bytes of one element of a Kineto type name, or None when it is not a tensor element type
    (``Scalar``, ``ScalarList``, ``TensorList``, empty)."""
    if not dtype:
        return None
    t = _TYPES.get(dtype.lower())
    return t[0] if t else None


def precision(dtype: str | None) -> str | None:
    """Precision key (``bf16``, ``fp32``, ``fp8``, ``int8``, ...) of a Kineto type name, or None."""
    if not dtype:
        return None
    t = _TYPES.get(dtype.lower())
    return t[1] if t else None


def short_name(dtype: str | None) -> str:
    """A compact label for tables: ``bf16``, ``fp32``, ``int64``, or the raw name."""
    p = precision(dtype)
    if p is None:
        return dtype or ""
    if p in ("int8",) and dtype and dtype.lower() == "unsigned char":
        return "uint8"
    return p
