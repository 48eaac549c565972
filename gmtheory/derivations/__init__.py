"""Symbolic derivations (sympy) that print LaTeX and expose their expressions."""
