"""The compiler: TOSA flatbuffer -> graph IR -> validated, rewritten, scheduled isa.Program."""
