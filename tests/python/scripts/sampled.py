"""For tests/e2e/test_sampling.py: a million ints (pymalloc, 28-32 bytes each) and a 32 MiB
bytearray (malloc), both kept to the end."""
ints = [n * 1000 + 7 for n in range(1_000_000)]  # @ints
buffer = bytearray(32 << 20)  # @buffer
print(f"kept {len(ints)} ints")
