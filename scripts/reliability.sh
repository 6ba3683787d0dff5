#!/usr/bin/env bash
# Runs the long versions of the reliability tests and writes their figures into
# docs/RELIABILITY.md, between the "figures" markers (the rest of the file is written
# by hand).
#
# A reliability test prints its result as a log line of the form
#     RELIABILITY <test name>: <figure text>
# and this script collects every such line of the run, with the test's PASS or FAIL.
# Which tests run is the -run pattern in RELIABILITY_RUN (the Makefile sets it); the
# length comes from the environment (PLAYHEAD_LONG=1, PLAYHEAD_CRASH_KILLS=20).
#
# With PLAYHEAD_LONG=1 it then runs each fuzzer of RELIABILITY_FUZZ ("pkg:FuzzName ...",
# packages relative to the module root) for RELIABILITY_FUZZTIME (default 20s) and
# prints "RELIABILITY FuzzName: ..." with the exec count go test reports.
set -uo pipefail
cd "$(dirname "$0")/.."

run=${RELIABILITY_RUN:?set RELIABILITY_RUN to the -run pattern of the reliability tests}
doc=docs/RELIABILITY.md
log=$(mktemp)
trap 'rm -f "$log" "$log.figures" "$log.fuzz"' EXIT

commit=$(git rev-parse --short=12 HEAD)
test -n "$(git status --porcelain --untracked-files=no)" && commit="$commit-dirty"
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
t0=$(date +%s)
# No -race: the long versions are about volume (kills, readers, minutes); make test
# runs the same tests, shorter, under the race detector.
go test -count=1 -p 1 -timeout 60m -v -run "$run" ./... 2>&1 | tee "$log" |
	grep -E '^\s*(--- (PASS|FAIL|SKIP)|ok|FAIL|.*RELIABILITY )' | cut -c1-400
status=${PIPESTATUS[0]}

# Fuzzing: go test fuzzes one target of one package at a time, so each fuzzer runs on its
# own, for a bounded time (-fuzzminimizetime 1s: minimising new inputs of the slower
# fuzzers would eat the budget). Its figure is the exec count of go test's last progress
# line; a failure (go test writes the input to the package's testdata/fuzz) fails the run.
if [ "${PLAYHEAD_LONG:-}" = 1 ]; then
	fuzztime=${RELIABILITY_FUZZTIME:-20s}
	for fz in ${RELIABILITY_FUZZ:-}; do
		pkg=./${fz%%:*} name=${fz#*:}
		f0=$(date +%s)
		go test -count=1 -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" -fuzzminimizetime 1s "$pkg" > "$log.fuzz" 2>&1
		fst=$?
		ftook=$(( $(date +%s) - f0 ))
		execs=$(sed -n 's/.*fuzz: elapsed: .*execs: \([0-9]*\).*/\1/p' "$log.fuzz" | tail -n 1)
		if [ "$fst" = 0 ] && [ -z "$execs" ]; then
			# go test exits 0 when -fuzz matches no fuzzer
			result=FAIL
			[ "$status" = 0 ] && status=1
			text="no fuzzing ran ($pkg): no fuzzer $name?"
		elif [ "$fst" = 0 ]; then
			result=PASS
			text="$execs execs in $fuzztime of fuzzing ($pkg), no failure"
		else
			result=FAIL
			[ "$status" = 0 ] && status=$fst
			input=$(grep -o 'Failing input written to [^ ]*' "$log.fuzz" | tail -n 1)
			text="failed${execs:+ after $execs execs} ($pkg, go test exit status $fst): ${input:-see the go test output}"
			grep -vE '^fuzz: elapsed' "$log.fuzz" | head -n 40
		fi
		printf -- '--- %s: %s (%ds)\nRELIABILITY %s: %s\n' "$result" "$name" "$ftook" "$name" "$text" | tee -a "$log"
	done
	rm -f "$log.fuzz"
fi
took=$(( $(date +%s) - t0 ))

# name -> PASS/FAIL/SKIP from the "--- PASS: name (1.23s)" lines, then one table row
# per RELIABILITY line.
awk '
	match($0, /--- (PASS|FAIL|SKIP): [^ ]+/) {
		split(substr($0, RSTART, RLENGTH), f, " ")
		sub(/:$/, "", f[2])
		result[f[3]] = f[2]
		next
	}
	match($0, /RELIABILITY [^ :]+: /) {
		name = substr($0, RSTART + 12, RLENGTH - 14)
		text = substr($0, RSTART + RLENGTH)
		gsub(/\|/, "\\|", text)
		order[++n] = name
		figure[n] = text
	}
	END {
		for (i = 1; i <= n; i++) {
			r = result[order[i]]
			if (r == "") r = "?"
			printf "| `%s` | %s | %s |\n", order[i], r, figure[i]
		}
	}
' "$log" > "$log.figures"

{
	echo "<!-- figures:begin (written by scripts/reliability.sh; edit outside the markers) -->"
	echo
	echo "Run of commit \`$commit\` on $started: \`make reliability\` ($(go version | cut -d' ' -f3), Linux $(uname -r), $(nproc) CPUs), $((took / 60)) min $((took % 60)) s, go test exit status $status."
	echo
	echo "| test | result | figure |"
	echo "| --- | --- | --- |"
	cat "$log.figures"
	echo
	echo "<!-- figures:end -->"
} > "$log.block"

if grep -q '<!-- figures:begin' "$doc" 2>/dev/null; then
	awk -v block="$log.block" '
		/<!-- figures:begin/ { while ((getline line < block) > 0) print line; skip = 1; next }
		/<!-- figures:end/ { skip = 0; next }
		!skip
	' "$doc" > "$doc.new" && mv "$doc.new" "$doc"
else
	cat "$log.block" >> "$doc"
fi
rm -f "$log.block"
echo "reliability: $(wc -l < "$log.figures") figures written to $doc (go test exit status $status, ${took}s)"
exit "$status"
