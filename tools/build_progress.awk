# SPDX-License-Identifier: Apache-2.0
# Filters `pip install -v` / `pip wheel -v` output of gpudiag's build down to what a person wants to
# watch: pip's and scikit-build-core's phases, the compile's progress in steps of 10 %, and errors.
# (pip shows a build backend's output only with -v, and then every compiler command as well.)
# Used by tools/demo.sh and tools/build_wheel.sh: pip ... -v 2>&1 | tee LOG | awk -f this_file
/^ *\*\*\* / { sub(/^ */, ""); print "    " $0; fflush(); next }
/^ *[A-Z][^:]*: started$/ { sub(/^ */, ""); sub(/: started$/, " ..."); print "    " $0; fflush(); next }
/^(Processing|Successfully installed|Successfully built|Saved )/ { print "    " $0; fflush(); next }
/^ *-- gpudiag: / { sub(/^ *-- /, ""); print "    " $0; fflush(); next }
/^ *\[[0-9]+\/[0-9]+\] / {
  split(substr($1, 2), n, "/")
  if (n[2] != total) { total = n[2]; next_pct = 0 }  # ninja restarted with another plan
  pct = int(n[1] * 100 / n[2])
  if (n[1] > 0 && pct >= next_pct) {
    printf "    compiling: %d %% (%d of %d steps)\n", pct, n[1], n[2]; fflush()
    next_pct = pct - pct % 10 + 10
  }
  next
}
/(error|ERROR):|CMake Error/ { print "    " $0; fflush() }
