"""Frontends that lower other model formats into the graph IR (compiler/ir.py)."""
