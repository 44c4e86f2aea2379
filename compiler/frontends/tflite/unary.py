"""Unary builtins."""
BUILTINS: dict = {}
