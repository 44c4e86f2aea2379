"""Run tosa_verif_build_tests once per operator, in one process, without its schema self-check.

Usage: python build_conformance.py OP[,OP...] <tosa_verif_build_tests arguments without --filter>

* One generator run per operator (`--filter ^op$`) keeps each operator's test selection the
  same as a stand-alone run, whatever else is generated alongside.
* The generator validates every data-generation recipe it writes against the test-descriptor
  JSON schema; that is about 80% of its run time and irrelevant here, so it is switched off.
"""
import sys

try:
    from schemavalidation import schemavalidation as _schema

    _schema.TestDescSchemaValidator.validate_config = lambda self, config, schema_type=None: None
except (ImportError, AttributeError):  # pragma: no cover - another tosa-tools layout
    pass

from generator.tosa_verif_build_tests import main


def run(ops: str, args: list[str]) -> int:
    for op in ops.split(","):
        status = main(args + ["--filter", f"^{op}$"])
        if status:
            print(f"build_conformance: generating {op} failed with status {status}", file=sys.stderr)
            return status
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1], sys.argv[2:]))
