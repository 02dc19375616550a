# shellcheck shell=bash
# The verdict rules of tests/gpu/device_check.sh, in one file so that the CPU
# machine can test them (tests/gpu/device_verdict_test.sh feeds them fake step
# results). Sourced, never run; plain bash and awk, no state of its own.
#
# Outcomes of a step: "pass", "fail: <why>", "inconclusive: <why>". The device
# check's exit: 0 every step passed, 1 something failed, 2 nothing failed but
# something was inconclusive (a sanitizer or bench that the deadline cut short).

# gtest_list <list-output-file>: the full test names in the output of
# `--gtest_list_tests` (suite lines end in '.', test lines are indented; a
# parameterized test's "# GetParam() = ..." comment is dropped), one a line.
gtest_list() {
  awk '/^[^ ]/ {s = $1} /^  [^ ]/ {print s $1}' "$1"
}

# gtest_classify <listed-file> <log>...: one line "<status> <test>" for each
# test of <listed-file>, in its order. Status: passed, skipped, failed,
# crashed (its "[ RUN ]" line is the last word it printed: the process died or
# was killed while it ran), notreached (never started: a crash or the timeout
# took the process first). A later log overrides an earlier one (the rerun of
# what was not reached).
gtest_classify() {
  local listed=$1
  shift
  # The list is read in BEGIN: an empty one must not take the first log's place.
  awk -v listed="$listed" '
    BEGIN { while ((getline line < listed) > 0) if (line != "") order[++n] = line }
    /^\[ RUN      \] / { t = $4; ran[t] = 1; if (!(t in st)) st[t] = "crashed"; next }
    /^\[       OK \] / { st[$4] = "passed"; next }
    /^\[  SKIPPED \] / { st[$4] = "skipped"; next }
    /^\[  FAILED  \] / { t = $4; sub(/,$/, "", t); if (t in st || t in ran) st[t] = "failed"; next }
    END {
      for (i = 1; i <= n; i++) {
        t = order[i]
        print ((t in st) ? st[t] : "notreached"), t
      }
    }' "$@" </dev/null
}

# gtest_counts <classified-file>: "<listed> <passed> <skipped> <failed>
# <crashed> <notreached>".
gtest_counts() {
  awk '{c[$1]++} END {printf "%d %d %d %d %d %d\n", NR, c["passed"], c["skipped"], c["failed"],
       c["crashed"], c["notreached"]}' "$1"
}

# gtest_verdict <classified-file>: a binary or filter that lists no test has
# checked nothing (fail); a skipped test is a failure on the GPU machine (a
# plugin that does not load skips every test); so is every test that did not
# run to "[ OK ]".
gtest_verdict() {
  local n passed skipped failed crashed notreached
  read -r n passed skipped failed crashed notreached < <(gtest_counts "$1")
  if ((n == 0)); then
    echo "fail: listed 0 tests"
  elif ((passed == n)); then
    echo "pass"
  else
    echo "fail: $passed/$n passed, $skipped skipped, $failed failed, $crashed crashed," \
      "$notreached not reached"
  fi
}

# gtest_path_line <label> <patterns> <classified-file> <log>...: one summary
# line for the tests whose full names match one of the ':'-separated globs:
# "<label>: ran R of L, passed P, S s" (S: the sum of the times gtest printed
# for them, a later log overriding an earlier one), or "<label>: no test in
# this build" when none is listed.
gtest_path_line() {
  local label=$1 patterns=$2 classified=$3
  shift 3
  awk -v label="$label" -v pat="$patterns" -v classified="$classified" '
    BEGIN {
      n = split(pat, p, ":")
      for (i = 1; i <= n; i++) { g = p[i]; gsub(/\./, "\\.", g); gsub(/\*/, ".*", g); re[i] = "^" g "$" }
      while ((getline line < classified) > 0) {
        split(line, f, " ")
        for (i = 1; i <= n; i++) {
          if (f[2] ~ re[i]) {
            listed++; want[f[2]] = 1
            if (f[1] != "notreached") ran++
            if (f[1] == "passed") passed++
            break
          }
        }
      }
    }
    /^\[ +(OK|FAILED|SKIPPED) +\] [^ ]+ \([0-9]+ ms\)$/ {
      if ($4 in want) { t = $5; sub(/^\(/, "", t); ms[$4] = t + 0 }
    }
    END {
      if (!listed) { printf "%s: no test in this build\n", label; exit }
      for (t in ms) total += ms[t]
      printf "%s: ran %d of %d, passed %d, %.1f s\n", label, ran, listed, passed, total / 1000
    }' "$@" </dev/null
}

# bench_verdict <rc> <log>: a bench passes when it exited 0 within its time and
# printed a measurement, no failure and no skip. rc 125 is device_check.sh's
# "the deadline left no time to start it".
bench_verdict() {
  local rc=$1 log=$2 line
  case "$rc" in
    0) ;;
    125) echo "inconclusive: not run, the deadline came first"; return ;;
    124 | 137) echo "fail: timed out"; return ;;
    *)
      if ((rc > 128)); then echo "fail: crashed (signal $((rc - 128)), exit $rc)"; else echo "fail: exit $rc"; fi
      return
      ;;
  esac
  if [ ! -s "$log" ]; then
    echo "fail: printed nothing"
    return
  fi
  line=$(grep -m1 -E 'FAILED|ERROR OCCURRED|^[Ss]kipped|Traceback' "$log" | cut -c1-160)
  if [ -n "$line" ]; then
    echo "fail: $line"
  else
    echo "pass"
  fi
}

# sanitizer_verdict <rc> <log>: compute-sanitizer slows kernels many times
# over, so a timeout says nothing about the kernels (inconclusive); an error it
# reports, a test that failed under it, or a filter that matched no test is a
# failure.
sanitizer_verdict() {
  local rc=$1 log=$2 errors
  errors=$(grep -m1 -oE 'ERROR SUMMARY: [0-9]+ error' "$log" 2>/dev/null | grep -oE '[0-9]+')
  case "$rc" in
    125) echo "inconclusive: not run, the deadline came first"; return ;;
    124 | 137)
      if [ -n "$errors" ] && ((errors > 0)); then
        echo "fail: timed out after reporting $errors error(s)"
      else
        echo "inconclusive: timed out under the sanitizer"
      fi
      return
      ;;
  esac
  if [ -n "$errors" ] && ((errors > 0)); then
    echo "fail: $errors memcheck error(s)"
  elif ((rc == 99)); then
    echo "fail: the sanitizer reported errors (exit 99)"
  elif grep -qE '^\[==========\] Running 0 tests' "$log" 2>/dev/null; then
    echo "fail: its filter matched no test"
  elif ((rc != 0)); then
    echo "fail: exit $rc under the sanitizer (a test failed or crashed)"
  else
    echo "pass"
  fi
}

# verdict_exit <outcome>...: 1 when one failed, else 2 when one was
# inconclusive, else 0.
verdict_exit() {
  local o rc=0
  for o in "$@"; do
    case "$o" in
      fail*) return 1 ;;
      inconclusive*) rc=2 ;;
    esac
  done
  return "$rc"
}
