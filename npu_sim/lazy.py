"""Package attributes imported on first use, so that a command's parser can import its package
(`npu-sim --help`) without numpy, the simulator or the frontends."""
import importlib


def lazy_exports(package: str, where: dict):
    """The module-level `__getattr__` and `__dir__` of `package`, whose attribute NAME lives in
    the module `where[NAME]` (relative to `package` when it starts with a dot)."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str):
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[name], package), name)
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(namespace) | set(where))

    return __getattr__, __dir__
