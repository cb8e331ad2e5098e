#!/usr/bin/env bash
# bench-gpu.sh reproduces issue 16's table in one call: vkllm against llama.cpp's llama-bench on
# this machine's GPU, on the same synthetic GGUF files, in the same run.
#
#   scripts/bench-gpu.sh [options] [LLAMA_BENCH]
#
#  1. builds bin/vkllm when it is missing (with Go; where there is none, build it with `make cli`
#     and bring bin/vkllm along),
#  2. writes the models with `vkllm synth`: 1B Q4_0 (llama-3.2-1B shape), 8B Q4_0 and 8B Q4_K
#     (llama-3-8B shape), and prints their sizes; the shared trained stories260K joins them
#     where ../shared/models (or shared/models in the checkout) holds it,
#  3. runs `vkllm bench --gpu -p 512 -n 128 -r 5` on each, and at -d 4096 on the 8B models,
#  4. runs `llama-bench -ngl 99 -p 512 -n 128 -r 5 -fa 0,1` on each, and `-d 4096 -fa 1` on the
#     8B models,
#  5. prints one markdown table (`vkllm results compare` of every JSON output): model, test,
#     vkllm t/s, llama.cpp fa0 and fa1, vkllm over the best of them (means, and medians of the
#     repetitions); then each model's load.
#
# LLAMA_BENCH is the path of a llama-bench binary, xz-compressed (.xz) or not. Without one, or
# when it does not start, only vkllm's side runs and the output says so. This script never
# builds llama.cpp. Progress goes to stderr, the report to stdout.
#
# Options:
#   --vocab FILE   tokenizer the models copy (default: llama's 32000-token SPM vocabulary from
#                  ../shared/reference/tokenizer/ggml-vocab-llama-spm.gguf or shared/reference/...
#                  beside or inside the checkout, as issue 16's table used; else vkllm's embedded
#                  512-token one, which makes the embedding and the head far smaller)
#   --models DIR   write the models into DIR and reuse the ones already there (default: a
#                  temporary folder, removed at exit)
#   --out DIR      keep every JSON output, log and the report in DIR (default: removed at exit)
#   -r N           timed repetitions of each test (default 5)
#   --depth-r N    timed repetitions of the tests at depth 4096 (default 3: vkllm's decode at
#                  depth is today's slowest part; with -r equal to --depth-r vkllm runs both
#                  depths in one process)
#   --moe          add the mixtures of experts: a Qwen3-30B-A3B-shaped qwen3moe in Q4_K and in
#                  IQ2_XXS (issue 12's two acceptance models, ~17 and ~8 GB) and the seed's
#                  Qwen3.6-35B-A3B-shaped qwen35moe hybrid in the UD-IQ2_XXS mix (issue 13,
#                  ~10.7 GB), all written tiled (synth -tile: a block pattern repeated, for
#                  timing only), without the depth tests
#   --only REGEX   run only the models whose preset-type name (1b-q4_0, 8b-q4_k, 30b-a3b-iq2_xxs,
#                  qwen36-35b-a3b-ud-iq2_xxs, stories260K-f32; the --moe ones with --moe) matches
#                  REGEX (grep -E), for a short call
#   --quick        tiny models and tests (pp32, tg8, depth 64, 2 repetitions): checks the whole
#                  script in a minute on any Vulkan device (lavapipe: VKLLM_GPU_VRAM_MB=1024)
#
# On a lent machine that has no Go and no checkout beside it: build bin/vkllm here (make cli),
# copy the vocabulary into an ignored folder of the checkout, carry bin/, that folder, the
# llama-bench binary and the Vulkan loader packages, and run
# `scripts/bench-gpu.sh --vocab FOLDER/ggml-vocab-llama-spm.gguf --out /tmp/bench llama-bench.xz`
# (then bring /tmp/bench back as one archive: it holds a JSON file and a log per run).
#
# Time on one H200 (16 cores), measured 2026-12-03 with -r 3 --depth-r 2: 167 s (synth 53 s);
# --moe adds about 2.5 min (synth of both ~1 min, each model's runs ~40 s).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPS="" DEPTH_REPS="" VOCAB="" MODELS="" OUT="" QUICK=0 MOE=0 LLAMA_BENCH="" ONLY=""

die() {
	echo "bench-gpu.sh: $*" >&2
	exit 2
}
say() { printf '[%4ds] %s\n' "$SECONDS" "$*" >&2; }
size() { awk -v b="$(stat -c %s "$1")" 'BEGIN { if (b < 1e7) printf "%.2f MB", b / 1e6; else printf "%.2f GB", b / 1e9 }'; }

while (($#)); do
	case $1 in
	--vocab) VOCAB=${2:?--vocab needs a file}; shift 2 ;;
	--models) MODELS=${2:?--models needs a folder}; shift 2 ;;
	--out) OUT=${2:?--out needs a folder}; shift 2 ;;
	-r) REPS=${2:?-r needs a count}; shift 2 ;;
	--depth-r) DEPTH_REPS=${2:?--depth-r needs a count}; shift 2 ;;
	--only) ONLY=${2:?--only needs a pattern}; shift 2 ;;
	--quick) QUICK=1; shift ;;
	--moe) MOE=1; shift ;;
	-h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
	-*) die "unknown option $1 (see --help)" ;;
	*)
		[[ -z $LLAMA_BENCH ]] || die "one LLAMA_BENCH only, got $LLAMA_BENCH and $1"
		LLAMA_BENCH=$1
		shift
		;;
	esac
done

if ((QUICK)); then
	P=32 N=8 DEPTH=64
	REPS=${REPS:-2} DEPTH_REPS=${DEPTH_REPS:-2}
	# label|synth preset|synth type|also at depth|synth arch
	SPECS=("tiny Q4_0|tiny|q4_0|0|llama" "tiny Q4_K|tiny|q4_k|1|llama")
	MOE_SPECS=("tiny qwen3moe Q4_K|tiny|q4_k|0|qwen3moe" "tiny qwen35moe Q8_0|tiny|q8_0|0|qwen35moe")
else
	P=512 N=128 DEPTH=4096
	REPS=${REPS:-5} DEPTH_REPS=${DEPTH_REPS:-3}
	SPECS=("1B Q4_0 (llama-3.2-1B shape)|1b|q4_0|0|llama" "8B Q4_0 (llama-3-8B shape)|8b|q4_0|1|llama" "8B Q4_K (llama-3-8B shape)|8b|q4_k|1|llama")
	MOE_SPECS=("30B-A3B Q4_K (qwen3moe, Qwen3-30B-A3B shape, tiled)|30b-a3b|q4_k|0|qwen3moe"
		"30B-A3B IQ2_XXS (qwen3moe, Qwen3-30B-A3B shape, tiled)|30b-a3b|iq2_xxs|0|qwen3moe"
		"seed UD-IQ2_XXS mix (qwen35moe, Qwen3.6-35B-A3B shape, tiled)|qwen36-35b-a3b|ud-iq2_xxs|0|qwen35moe")
fi
((!MOE)) || SPECS+=("${MOE_SPECS[@]}")
# The shared trained stories260K (issue 16: small models must not regress), where a checkout
# has ../shared (or shared/) beside or inside it.
for d in "$ROOT/../shared/models" "$ROOT/shared/models"; do
	if [[ -f $d/stories260K.gguf ]]; then
		SPECS+=("stories260K F32 (shared, trained)|stories260K|f32|0|shared:$d/stories260K.gguf")
		break
	fi
done
if [[ -n $ONLY ]]; then
	KEPT=()
	for spec in "${SPECS[@]}"; do
		IFS='|' read -r _ preset type _ _ <<<"$spec"
		! grep -qE -- "$ONLY" <<<"$preset-$type" || KEPT+=("$spec")
	done
	((${#KEPT[@]})) || die "--only $ONLY matches none of the models"
	SPECS=("${KEPT[@]}")
fi
[[ $REPS =~ ^[1-9][0-9]*$ ]] || die "-r $REPS: want a count of 1 or more"
[[ $DEPTH_REPS =~ ^[1-9][0-9]*$ ]] || die "--depth-r $DEPTH_REPS: want a count of 1 or more"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-gpu.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
OUT=${OUT:-$WORK/out}
MODELS=${MODELS:-$WORK/models}
mkdir -p "$OUT" "$MODELS"
REPORT=$OUT/report.md
: >"$REPORT"
report() { printf '%s\n' "$*" | tee -a "$REPORT"; }

# vkllm: the checkout's bin/vkllm (VKLLM overrides), built when missing.
VKLLM=${VKLLM:-$ROOT/bin/vkllm}
if [[ ! -x $VKLLM ]]; then
	command -v go >/dev/null || die "no $VKLLM and no Go toolchain here: build it with 'make cli' where Go is and bring bin/vkllm along"
	say "building $VKLLM"
	(cd "$ROOT" && go build -tags sqlite_fts5 -o "$VKLLM" ./cmd/vkllm)
fi

# The peer: decompressed when it comes as .xz, checked to start.
PEER="" PEER_NOTE="" BANNER=""
if [[ -z $LLAMA_BENCH ]]; then
	PEER_NOTE="no llama-bench given: only vkllm's side ran (pass the path of a llama-bench binary for the llama.cpp columns)"
elif [[ ! -f $LLAMA_BENCH ]]; then
	PEER_NOTE="llama-bench $LLAMA_BENCH does not exist: only vkllm's side ran"
else
	PEER=$LLAMA_BENCH
	if [[ $LLAMA_BENCH == *.xz ]]; then
		PEER=$WORK/llama-bench
		xz -dc "$LLAMA_BENCH" >"$PEER" || die "decompress $LLAMA_BENCH failed"
		chmod +x "$PEER"
	fi
	if ! "$PEER" --help >"$OUT/llama-bench-start.log" 2>&1; then
		PEER_NOTE="llama-bench $LLAMA_BENCH does not start (its output: $(tail -n 3 "$OUT/llama-bench-start.log" | tr '\n' ' ')): only vkllm's side ran"
		PEER=""
	fi
fi
[[ -z $PEER_NOTE ]] || say "$PEER_NOTE"

# The models, written once (to a .part file, then renamed, so a killed run leaves none half
# written) and reused from --models DIR.
if [[ -z $VOCAB ]] && ((!QUICK)); then
	for v in "$ROOT/../shared/reference/tokenizer/ggml-vocab-llama-spm.gguf" "$ROOT/shared/reference/tokenizer/ggml-vocab-llama-spm.gguf"; do
		if [[ -f $v ]]; then
			VOCAB=$v
			break
		fi
	done
fi
[[ -z $VOCAB || -f $VOCAB ]] || die "--vocab $VOCAB does not exist"
VOCAB_NOTE="vkllm's embedded 512-token vocabulary (issue 16's table used llama's 32000-token SPM one: --vocab FILE)"
[[ -z $VOCAB ]] || VOCAB_NOTE="$(basename "$VOCAB")"
TAG=""
[[ -z $VOCAB ]] || TAG="-$(basename "$VOCAB" .gguf)"

FILES=()
for spec in "${SPECS[@]}"; do
	IFS='|' read -r label preset type _ arch <<<"$spec"
	# llama's files keep their names; the hybrid keeps its own 248320-token vocabulary, and the
	# full-size mixtures of experts are written tiled (seconds instead of hours)
	file=$MODELS/synth-$preset-$type$TAG.gguf vocab=$VOCAB tile=""
	if [[ $arch == shared:* ]]; then
		FILES+=("${arch#shared:}")
		say "$label: ${arch#shared:}, $(size "${arch#shared:}")"
		continue
	fi
	if [[ $arch != llama ]]; then
		[[ $arch != qwen35moe ]] || vocab=""
		[[ $preset == tiny ]] || tile=-tile
		file=$MODELS/synth-$arch-$preset-$type${vocab:+$TAG}.gguf
	fi
	how="reused"
	if [[ ! -s $file ]]; then
		start=$SECONDS
		say "synth $label"
		"$VKLLM" synth -arch "$arch" -preset "$preset" -type "$type" $tile ${vocab:+-vocab-from "$vocab"} -o "$file.part" >&2
		mv "$file.part" "$file"
		how="written in $((SECONDS - start)) s"
	fi
	FILES+=("$file")
	say "$label: $(basename "$file"), $(size "$file") ($how)"
done

JSONS=() FAILED=()
run_ours() { # name file flags...
	local name=$1 file=$2
	shift 2
	say "vkllm bench $name $*"
	cat "$file" >/dev/null # the load is timed from the page cache
	if "$VKLLM" bench --gpu -m "$file" -p "$P" -n "$N" -o json "$@" >"$OUT/vkllm-$name.json" 2>"$OUT/vkllm-$name.log"; then
		grep -h '^load:' "$OUT/vkllm-$name.log" >&2 || true
		JSONS+=("$OUT/vkllm-$name.json")
	else
		say "vkllm bench $name failed (exit $?); the end of its log:"
		tail -n 12 "$OUT/vkllm-$name.log" >&2
		FAILED+=("vkllm $name")
	fi
}
run_peer() { # name file flags...
	local name=$1 file=$2
	shift 2
	[[ -n $PEER ]] || return 0
	say "llama-bench $name $*"
	if "$PEER" -m "$file" -p "$P" -n "$N" -ngl 99 -o json "$@" >"$OUT/llama-bench-$name.json" 2>"$OUT/llama-bench-$name.log"; then
		JSONS+=("$OUT/llama-bench-$name.json")
	else
		say "llama-bench $name failed (exit $?); the end of its log:"
		tail -n 12 "$OUT/llama-bench-$name.log" >&2
		FAILED+=("llama-bench $name")
	fi
}

# A fresh machine's GPU ran the first tests at a quarter of its speed (the H200, 2026-12-03:
# the 1B's pp512 at 9656 t/s and llama.cpp's fa0 at 12212 as the first tests of the call,
# 37799-38929 and 48550 a minute later), so one untimed run of the first model warms it.
say "warm-up: vkllm bench ${FILES[0]##*/} (discarded)"
"$VKLLM" bench --gpu -m "${FILES[0]}" -p "$P" -n "$N" -r "$REPS" -no-save >/dev/null 2>&1 || true

for i in "${!SPECS[@]}"; do
	IFS='|' read -r _ preset type deep arch <<<"${SPECS[$i]}"
	name=$preset-$type file=${FILES[$i]}
	[[ $arch == llama || $arch == shared:* ]] || name=$arch-$name
	if ((deep)) && [[ $DEPTH_REPS == "$REPS" ]]; then
		run_ours "$name" "$file" -r "$REPS" -d "0,$DEPTH"
	else
		run_ours "$name" "$file" -r "$REPS"
		((!deep)) || run_ours "$name-d$DEPTH" "$file" -r "$DEPTH_REPS" -d "$DEPTH"
	fi
	run_peer "$name" "$file" -r "$REPS" -fa 0,1
	((!deep)) || run_peer "$name-d$DEPTH" "$file" -r "$DEPTH_REPS" -d "$DEPTH" -fa 1
done

# The peer's Vulkan device line says whether it ran at its best: with its cooperative-matrix
# shaders, "matrix cores: NV_coopmat2" on NVIDIA.
if [[ -n $PEER ]]; then
	BANNER=$(cat "$OUT"/llama-bench-*.log | grep '^ggml_vulkan: [0-9]' | sort -u | head -n 3 || true)
	if [[ -z $BANNER ]]; then
		PEER_NOTE="llama-bench printed no ggml_vulkan device line: is it a Vulkan build?"
	elif [[ $BANNER == *NVIDIA* && $BANNER != *NV_coopmat2* ]]; then
		PEER_NOTE="the peer's device line lacks 'matrix cores: NV_coopmat2': it ran without its cooperative-matrix shaders, below its best (issue 16)"
	fi
fi

report "## vkllm against llama.cpp, same run ($(date -u '+%Y-%m-%d %H:%M UTC'), scripts/bench-gpu.sh)"
report ""
report "- vkllm: \`bench --gpu -p $P -n $N -r $REPS\`, at depth \`-d $DEPTH -r $DEPTH_REPS\`; $("$VKLLM" version); tg is a greedy generation (each step's token the argmax of the step before, picked on the device), the next step queued behind the running one unless \`VKLLM_GPU_CHAIN=0\`${VKLLM_GPU_CHAIN:+ (VKLLM_GPU_CHAIN=$VKLLM_GPU_CHAIN here)}"
report "- llama.cpp: \`llama-bench -ngl 99 -p $P -n $N -r $REPS -fa 0,1\`, at depth \`-d $DEPTH -fa 1 -r $DEPTH_REPS\`${PEER:+; $LLAMA_BENCH}"
[[ -z $BANNER ]] || report "- peer device: ${BANNER//$'\n'/; }"
report "- device: $("$VKLLM" devices 2>/dev/null | sed -n '/^\*/{N;s/\n */, /;s/, key .*//;p;q}')"
if command -v nvidia-smi >/dev/null; then
	report "- nvidia-smi: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1 || true)"
fi
report "- models ($VOCAB_NOTE):"
for i in "${!SPECS[@]}"; do
	IFS='|' read -r label _ <<<"${SPECS[$i]}"
	report "  - $label: $(basename "${FILES[$i]}"), $(size "${FILES[$i]}")"
done
[[ -z $PEER_NOTE ]] || report "- note: $PEER_NOTE"
((${#FAILED[@]} == 0)) || report "- failed (logs in $OUT): ${FAILED[*]}"
report ""
if ((${#JSONS[@]})); then
	"$VKLLM" results compare "${JSONS[@]}" | tee -a "$REPORT"
else
	report "no run finished: nothing to table"
fi
report ""
report "$SECONDS s in all"
[[ $OUT == "$WORK"/* ]] || say "report and every output: $OUT"
for f in "${FAILED[@]}"; do
	[[ $f == vkllm* ]] && exit 1
done
exit 0
