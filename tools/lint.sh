#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Forbidden patterns (the library lives inside other people's processes) and binding hygiene.
# Exit status: 0 clean, 1 violations found.
set -u
cd "$(dirname "$0")/.."
status=0

report() {  # report <title> <grep output>
  if [ -n "$2" ]; then
    printf 'lint: %s\n%s\n\n' "$1" "$2"
    status=1
  fi
}

# Strip // comments before matching so documentation may mention the words.
code_grep() {  # code_grep <regex> <paths...>
  local regex=$1; shift
  grep -rnE --include='*.cpp' --include='*.hpp' --include='*.h' --include='*.cc' "$regex" "$@" \
    2>/dev/null | grep -vE '^[^:]+:[0-9]+:\s*//' | grep -vE '^[^:]+:[0-9]+:.*//.*('"$regex"')' || true
}

report "abort/exit/terminate/assert in libgpudiag (never end the host process)" \
  "$(code_grep '(^|[^_[:alnum:]])(abort|exit|_exit|quick_exit)\(|std::terminate|(^|[^_[:alnum:]])assert\(' libgpudiag)"
report "throw in capture code (callbacks run inside CUDA; use Status)" \
  "$(code_grep '(^|[^_[:alnum:]])throw([^_[:alnum:]]|$)' libgpudiag/src/capture)"
# A message (finding, note, error) is one fmt format string that reads as the sentence it
# prints, not a chain of std::to_string pieces.
report "std::to_string in libgpudiag/src (messages are written with fmt: fmt::format, or fmt::to_string for a bare number)" \
  "$(code_grep 'std::to_string' libgpudiag/src)"
report "public headers must include only the standard library and gpudiag headers" \
  "$(grep -rnE '^\s*#\s*include\s*[<"]' libgpudiag/include | grep -vE '#\s*include\s*<(gpudiag/[a-z_]+\.h(pp)?|[a-z_]+(\.h)?)>' ; grep -rnE '^\s*#\s*include\s*<(cuda|cupti|nvml|nvtx|fmt|pybind|simdjson|zlib|libdeflate)' libgpudiag/include || true)"
if [ -d bindings ]; then
  report "bindings must include only public gpudiag headers (no internals, no CUDA)" \
    "$(grep -rnE '^\s*#\s*include' bindings --include='*.cpp' --include='*.hpp' | grep -E 'libgpudiag/src|"(support|core|recording|importers|capture|analysis|output|api)/|<(cupti|cuda|nvml|nvtx)' || true)"
fi

# Layers: the folders of libgpudiag/src follow the data path, and a file includes only its own
# layer's folder or those below it. importers and capture are one layer and never include each
# other (both only produce events).
layer_of() {
  case $1 in
    support) echo 0 ;; core) echo 1 ;; recording) echo 2 ;;
    importers|capture) echo 3 ;; analysis) echo 4 ;; output) echo 5 ;; api) echo 6 ;;
    *) echo "" ;;
  esac
}
layer_violations() {
  local file area inc target la lt
  while IFS= read -r line; do
    file=${line%%:*}
    area=${file#libgpudiag/src/}; area=${area%%/*}
    inc=$(printf '%s' "$line" | sed -E 's/.*#\s*include\s*"([^"]+)".*/\1/')
    target=${inc%%/*}
    la=$(layer_of "$area"); lt=$(layer_of "$target")
    if [ -z "$la" ]; then echo "$file: folder '$area' is not a known layer"; continue; fi
    [ -z "$lt" ] && continue          # a same-folder include ("foo.hpp")
    if [ "$area" = capture ] && [ "$target" = capture ]; then capture_room_violation "$line" "$inc"; fi
    [ "$area" = "$target" ] && continue
    if [ "$lt" -ge "$la" ]; then echo "$line   ($area may not include $target)"; fi
  done < <(grep -rnE '^\s*#\s*include\s*"' libgpudiag/src)
}
# Inside capture/, the rooms: platform/ (the seam to the OS and the CUDA driver) < cupti/, nvml/
# and nvtx/ (one source each; they never include each other) < capture/ itself (the backend that
# composes them).
capture_room_of() {  # capture_room_of <path below capture/>
  case $1 in
    platform/*) echo 0 ;; cupti/*|nvml/*|nvtx/*) echo 1 ;;
    */*) echo "" ;; *) echo 2 ;;
  esac
}
capture_room_violation() {  # capture_room_violation <grep line> <included path>
  local file=${1%%:*} from to rf rt
  from=${file#libgpudiag/src/capture/}; to=${2#capture/}
  rf=$(capture_room_of "$from"); rt=$(capture_room_of "$to")
  if [ -z "$rf" ]; then echo "$file: folder capture/${from%%/*} is not a known room"; return; fi
  if [ -z "$rt" ]; then echo "$1   (capture/${to%%/*} is not a known room)"; return; fi
  from=$(dirname "capture/$from"); to=$(dirname "capture/$to")
  [ "$from" = "$to" ] && return
  if [ "$rt" -ge "$rf" ]; then echo "$1   ($from may not include $to)"; fi
}
report "includes must go down the layers support < core < recording < importers|capture < analysis < output < api, and inside capture/ platform < cupti|nvml|nvtx < capture" \
  "$(layer_violations)"

# Enum names are written once (libgpudiag/src/core/names.cpp); the headers' enumerators, the
# bindings (bind_enum<E>), python/gpudiag/_core.pyi and the docs' name tables must match them.
report "enum names drift between names.cpp, the headers, the bindings, _core.pyi and the docs (tools/gen_names.py --write regenerates the stub and docs/names.md)" \
  "$(python3 tools/gen_names.py --check 2>&1 >/dev/null)"

# Formatting: .clang-format, with the pinned clang-format 14 (other versions format differently,
# so without it the check is skipped, and says so). Fix with: clang-format-14 -i <files>.
if command -v clang-format-14 >/dev/null; then
  report "C/C++ not formatted by .clang-format (clang-format-14 -i <file>)" \
    "$(git ls-files '*.cpp' '*.hpp' '*.h' '*.c' '*.cc' | grep -v '^tests/fuzz/corpus/' |
       xargs clang-format-14 --dry-run 2>&1 | grep -oE '^[^:]+:[0-9]+:[0-9]+: (warning|error)' |
       cut -d: -f1 | sort -u)"
else
  echo "lint: clang-format-14 not installed: formatting not checked" >&2
fi

# Python formatting: ruff format (the pinned ruff of the lint extra, else one on PATH).
RUFF=.venv/bin/ruff
[ -x "$RUFF" ] || RUFF=$(command -v ruff || true)
if [ -n "$RUFF" ]; then
  report "Python not formatted by ruff format (ruff format <file>)" \
    "$("$RUFF" format --diff python tests/python tests/scenarios examples/python tools bench 2>/dev/null |
       sed -n 's/^--- //p')"
else
  echo "lint: ruff not installed yet: Python formatting not checked here (tools/check.sh checks it)" >&2
fi

# The entry-point matrix: its Python, and docs/entry_matrix.md generated from its spec. (A partial
# copy of the sources without the matrix, as test_names_lint.py makes, has nothing to check.)
if [ -d tests/matrix ]; then
  report "tests/matrix: ruff check and format, docs/entry_matrix.md current (tools/gen_entry_matrix.py --write)" \
    "$( { if [ -n "$RUFF" ]; then
            "$RUFF" check -q tests/matrix tools/gen_entry_matrix.py
            "$RUFF" format --diff tests/matrix 2>/dev/null | sed -n 's/^--- //p'
          fi
          python3 tools/gen_entry_matrix.py --check; } 2>&1)"
fi
if [ $status -eq 0 ]; then echo "lint: clean"; fi
exit $status
