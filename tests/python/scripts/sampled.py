"""For tests/e2e/test_sampling.py: a million ints (pymalloc, 28-32 bytes each), a 32 MiB
bytearray (grown by PyObject_Realloc) and 20,000 bytes of 2,000 (PyObject_Calloc, which pymalloc
hands on to the raw domain), all kept to the end."""
ints = [n * 1000 + 7 for n in range(1_000_000)]  # @ints
buffer = bytearray(32 << 20)  # @buffer
medium = [bytes(2000) for _ in range(20_000)]  # @medium
print(f"kept {len(ints)} ints")
