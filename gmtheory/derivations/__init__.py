"""Sympy derivations that print LaTeX and expose the expressions they derive.

* :mod:`.attention_mgf` — Gaussian tilt, Prop. 2.1 and eq. (3).
* :mod:`.lda_effective` — the effective LDA predictor (eqs. (6)–(7)) and Lemma B.10.
* :mod:`.hermite_closed_forms` — Hermite coefficients of ReLU, sign, |z|, z², z³, erf,
  sin and cos (checked against quadrature by ``gmtheory verify --only hermite``).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["residuals", "write_all"]


def residuals() -> dict:
    """Every ``*_residual`` expression of every derivation (all must be 0)."""
    from . import attention_mgf, lda_effective

    out = {}
    for mod in (attention_mgf, lda_effective):
        name = mod.__name__.rsplit(".", 1)[-1]
        out.update({f"{name}.{k}": v for k, v in mod.derive().items() if k.endswith("_residual")})
    return out


def write_all(path: str | Path) -> Path:
    """Write all derivations as one markdown file with LaTeX."""
    from . import attention_mgf, hermite_closed_forms, lda_effective

    path = attention_mgf.write_markdown(path)
    path.write_text(path.read_text() + "\n\n" + lda_effective.markdown() + "\n\n"
                    + hermite_closed_forms.markdown())
    return path
