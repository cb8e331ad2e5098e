#!/usr/bin/env bash
# ab-gpu.sh times one model under several sets of environment switches (the VKLLM_GPU_* A/B
# switches of docs/ENV.md) in one call, the sets taking turns round after round so that a
# machine's drift falls on all of them alike, and prints each set's t/s for each test row (pp,
# tg, at a depth) per round, then their means.
#
#   scripts/ab-gpu.sh [options] MODEL SET [SET ...]
#
# A SET is a space-separated list of VAR=value assignments, or "-" for the defaults, e.g.
#   scripts/ab-gpu.sh -n 128 seed.gguf - "VKLLM_GPU_SHARED_X8=0" "VKLLM_GPU_DELTA_FAST=0"
#
# Options (passed to `vkllm bench --gpu`, one process a set and round, nothing saved):
#   -p N       prompt tokens (default 0: decode only)
#   -n N       generated tokens (default 128)
#   -d N       depth: tokens in the cache before each test (default 0)
#   -r N       repetitions inside each process (default 2)
#   --rounds N rounds over all the sets (default 2)
# VKLLM is the vkllm binary (default bin/vkllm in the checkout, then vkllm on PATH). Progress
# goes to stderr, the report to stdout.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
P=0 N=128 D=0 R=2 ROUNDS=2

die() {
	echo "ab-gpu.sh: $*" >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case $1 in
	-p) P=${2:?-p needs a count}; shift 2 ;;
	-n) N=${2:?-n needs a count}; shift 2 ;;
	-d) D=${2:?-d needs a count}; shift 2 ;;
	-r) R=${2:?-r needs a count}; shift 2 ;;
	--rounds) ROUNDS=${2:?--rounds needs a count}; shift 2 ;;
	-h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) die "unknown option $1 (see --help)" ;;
	*) break ;;
	esac
done
[ $# -ge 2 ] || die "give a model and at least one set (see --help)"
MODEL=$1
shift
[ -r "$MODEL" ] || die "cannot read the model $MODEL"
for v in "$P" "$N" "$D" "$R" "$ROUNDS"; do
	case $v in '' | *[!0-9]*) die "counts are whole numbers, got '$v'" ;; esac
done
VK=${VKLLM:-}
if [ -z "$VK" ]; then
	if [ -x "$ROOT/bin/vkllm" ]; then VK=$ROOT/bin/vkllm; else VK=$(command -v vkllm || true); fi
fi
[ -n "$VK" ] && [ -x "$VK" ] || die "no vkllm binary: build it with 'make cli' or set VKLLM"
for set in "$@"; do
	[ "$set" = - ] && continue
	for a in $set; do
		case $a in VKLLM_*=*) ;; *) die "a set holds VKLLM_*=value assignments or is '-', got '$a'" ;; esac
	done
done

# rate runs one bench process under the set's variables and prints a "TEST T/S" line for each
# of its test rows (pp512, tg128, tg128 @ d4096 ...), or "failed".
rate() {
	local set=$1 args=(bench --gpu -no-save -m "$MODEL" -p "$P" -n "$N" -r "$R")
	[ "$D" -gt 0 ] && args+=(-d "$D")
	[ "$set" = - ] && set=
	local out
	if ! out=$(env $set "$VK" "${args[@]}" 2>&1); then
		echo "failed"
		printf '%s\n' "$out" | tail -3 >&2
		return
	fi
	printf '%s\n' "$out" | grep -E '^\|.*(tg|pp)[0-9]' | awk -F'|' '{
		test = $7; gsub(/^ +| +$/, "", test); gsub(/ +/, "_", test)
		split($8, a, " "); print test, a[1] }'
}

declare -A sum count
tests=()
echo "| round | set | test | t/s |"
echo "|---:|---|---|---:|"
for ((round = 1; round <= ROUNDS; round++)); do
	for set in "$@"; do
		echo "[round $round] $set" >&2
		rows=$(rate "$set")
		if [ -z "$rows" ] || [ "$rows" = failed ]; then
			printf '| %d | %s | - | failed |\n' "$round" "$set"
			continue
		fi
		while read -r test t; do
			printf '| %d | %s | %s | %s |\n' "$round" "$set" "${test//_/ }" "$t"
			case " ${tests[*]} " in *" $test "*) ;; *) tests+=("$test") ;; esac
			key="$set|$test"
			sum[$key]=$(awk -v a="${sum[$key]:-0}" -v b="$t" 'BEGIN { print a + b }')
			count[$key]=$((${count[$key]:-0} + 1))
		done <<<"$rows"
	done
done
echo
echo "| set | test | mean t/s | rounds |"
echo "|---|---|---:|---:|"
for test in "${tests[@]}"; do
	for set in "$@"; do
		key="$set|$test"
		if [ "${count[$key]:-0}" -gt 0 ]; then
			mean=$(awk -v a="${sum[$key]}" -v n="${count[$key]}" 'BEGIN { printf "%.2f", a / n }')
		else
			mean=failed
		fi
		printf '| %s | %s | %s | %s |\n' "$set" "${test//_/ }" "$mean" "${count[$key]:-0}"
	done
done
