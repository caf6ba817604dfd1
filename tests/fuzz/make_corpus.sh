#!/usr/bin/env bash
# Usage: tests/fuzz/make_corpus.sh [BUILD_DIR]   (default: build, a normal build)
# Records the seed captures of the fuzz corpus (corpus/*/seed-*) from the test programs and
# examples, with their snapshot indexes. Run it again after a change of the capture or index
# format (the test fuzz_seeds_current says when). Inputs the fuzzer found (corpus/*/crash-*)
# are kept, and so are the captures of older formats that readers still read (format-8.0-*).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
memlens=$build/bin/memlens seeds=${MEMLENS_MAKE_SEEDS:-$build/fuzz/memlens_fuzz_make_seeds}
programs=$build/tests/programs
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python=${MEMLENS_TEST_PYTHON:-python3}

# name, then the command to record (small runs: the whole corpus stays under a few hundred KiB)
record() {
  local name=$1; shift
  "$memlens" run --no-index -o "$tmp/$name.mlens" "$@" >/dev/null 2>&1 </dev/null || true
  [ -s "$tmp/$name.mlens" ] || { echo "make_corpus: $name recorded nothing" >&2; exit 1; }
}
record native "$programs/known_peak"
record threads "$programs/two_threads"
record realloc "$programs/realloc_chain"
record mmap "$programs/mmap_anon"
record reserve "$programs/reserve_commit"  # PROT_NONE reservations, mprotect
record dlopen "$programs/dlopen_plugin" "$programs/plugin_alloc.so"
record exec "$programs/exec_other" "$programs/known_peak"
record heaps "$build/examples/foo_pool"
record markers "$build/examples/game_loop" 3
record sampled --sample-rate 64 "$programs/known_peak"
# Python, sampled: a whole interpreter start recorded in full is megabytes.
record python --sample-rate 65536 "$python" -S -c 'x = [bytearray(100000) for _ in range(5)]'
# A free-threaded Python (mimalloc's mappings, kinds 42 and 43), where tools/build-pythons made one.
ft_python=${MEMLENS_FT_PYTHON:-${MEMLENS_PYTHONS_DIR:-$HOME/.cache/memlens/pythons}/3.13t/bin/python3.13t}
if [ -x "$ft_python" ]; then
  record python_ft --sample-rate 65536 "$ft_python" -S -c 'x = [bytearray(100000) for _ in range(5)]'
fi


rm -f "$here"/corpus/*/seed-*
mkdir -p "$here"/corpus/{records,capture,index}
for capture in "$tmp"/*.mlens; do
  name=$(basename "$capture" .mlens)
  # Checkpoints every few events, so the index holds saved states to resume from.
  MEMLENS_INDEX_SPACING=50 "$memlens" index "$capture" >/dev/null
  "$seeds" raw "$capture" "$here/corpus/capture/seed-$name"
  "$seeds" records "$capture" "$here/corpus/records/seed-$name"
  "$seeds" index "$capture" "$here/corpus/index/seed-$name"
done
# Two as the agent wrote them, zstd-compressed, for the decompression path.
cp "$tmp/native.mlens" "$here/corpus/capture/seed-native-zstd"
cp "$tmp/python.mlens" "$here/corpus/capture/seed-python-zstd"
du -sh "$here/corpus"
