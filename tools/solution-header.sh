# tools/solution-header.sh -- the rules of a solution's patch header and of a program run,
# shared by tools/check-solutions, tools/check-exercises and tools/solution-runs (sourced,
# not run). The format is in solutions/README.md.

# header KEY FILE: the values of "% KEY: value" lines before the first "diff --git"
# (a carriage return at a line's end is dropped).
header() { sed -n '/^diff --git /q; s/\r$//; s/^% '"$1"': *//p' "$2"; }

# run_problem WORDS: why WORDS cannot be a run's arguments, or nothing. A run is a program
# and its words; its output and status are captured by the caller, so a shell operator
# (a redirection, a pipe, a list, a command substitution) is refused.
run_problem() {
  if [[ $1 =~ [\;\|\&\<\>\`] || $1 == *'$('* ]]; then
    echo "'$1' holds a shell operator; a run is a program and its words"
  fi
}

# header_problems PATCH: one line per rule the patch's header breaks, or nothing.
header_problems() {
  local patch=$1 stage kind r p
  stage=$(header stage "$patch"); kind=$(header kind "$patch")
  if grep -q $'\r' < <(sed -n '/^diff --git /q; p' "$patch"); then
    echo "its header has carriage returns (CRLF line ends)"
  fi
  if [ -z "$stage" ]; then echo "its header has no '% stage: NN'"
  elif ! [[ $stage =~ ^[0-9][0-9]$ ]]; then echo "its stage '$stage' is not two digits (NN)"
  elif ! ls stages/stage_"$stage"_*.nw >/dev/null 2>&1; then echo "there is no stage $stage (stages/stage_${stage}_*.nw)"
  fi
  [[ $kind == break || $kind == build ]] || echo "its kind is '$kind', not break or build"
  [ -n "$(header test "$patch")" ] || echo "its header names no test"
  [[ $kind == build && -n $(header fails "$patch") ]] && echo "a build solution lists fails:"
  while IFS= read -r r; do
    [[ $r =~ ^stage-[0-9][0-9]( |$) ]] || echo "its run '$r' is not a stage program (stage-NN ARGS)"
    p=$(run_problem "${r#stage-?? }"); [ -z "$p" ] || echo "its run $p"
  done < <(header run "$patch")
  return 0
}
