"""``cosa_kernel_ab``: the alpha/beta entry every CPU kernel (dense and sparse) gets beside ``cosa_kernel``."""

from __future__ import annotations


def ab_entry(ctype: str, params: list[str], names: list[str], out: str, words: str) -> str:
    """C text of ``cosa_kernel_ab(params..., double alpha, double beta, int nthreads)``: ``out := alpha *
    cosa_kernel(...) + beta * out`` (``words`` elements of type ``ctype``) following ``targets.exceptions``:
    alpha = 0 calls no kernel (its inputs are not read), beta = 0 does not read ``out``, alpha = beta = 0
    writes exact zeros, otherwise every product is an IEEE product (no zero is skipped)."""
    call = f"cosa_kernel({', '.join(names)}, nthreads);"
    return "\n".join([
        "/* out := alpha * (the nest) + beta * out; see targets/exceptions.py for the NaN/Inf policy */",
        f"void cosa_kernel_ab({', '.join(params)}, double alpha, double beta, int nthreads) {{",
        f"    const long n = {words};",
        f"    const {ctype} a = ({ctype})alpha, b = ({ctype})beta;",
        "    if (alpha == 0.0) {  /* the inputs are not read */",
        f"        if (beta == 0.0) {{ memset({out}, 0, n * sizeof({ctype})); return; }}  /* exact zeros */",
        f"        for (long i = 0; i < n; i++) {out}[i] = b * {out}[i];",
        "        return;",
        "    }",
        "    if (beta == 0.0) {  /* out is not read */",
        f"        {call}",
        f"        if (alpha != 1.0) for (long i = 0; i < n; i++) {out}[i] = a * {out}[i];",
        "        return;",
        "    }",
        f"    {ctype} *c = ({ctype} *)malloc((n > 0 ? n : 1) * sizeof({ctype}));",
        f"    memcpy(c, {out}, n * sizeof({ctype}));",
        f"    {call}",
        f"    for (long i = 0; i < n; i++) {out}[i] = a * {out}[i] + b * c[i];",
        "    free(c);",
        "}",
        ""])
