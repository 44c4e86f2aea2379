"""Binary builtins."""
BUILTINS: dict = {}
