"""The contract between compiler and machine: commands, operand descriptors, encoding, assembly."""
