#!/bin/sh
# Regenerates the llama.cpp references of engine/synth_llamacpp_test.go: for each ARCH-TYPE
# below, `vkllm synth -arch ARCH -preset tiny -type TYPE -seed 7` (the embedded 512-token
# vocabulary), then llama.cpp's greedy ids and top-5 logits for six prompts, 16 steps each,
# through node-llama-cpp 3.22.1 on the CPU (../shared/tools/llamacpp-ref.mjs).
# usage: generate.sh REF_DIR [ARCH-TYPE...]   REF_DIR holds node_modules with node-llama-cpp and
# a copy of llamacpp-ref.mjs (see ../shared/README.md); run from the repository root.
set -eu
ref=$1
shift
models=${*:-"qwen35-Q8_0 qwen35moe-Q8_0 qwen35-IQ2_XXS qwen35moe-MXFP4 qwen35moe-IQ2_XXS llama-Q8_0 qwen3-Q8_0 qwen3moe-Q8_0 qwen3moe-Q4_K qwen3moe-IQ4_XS qwen3moe-IQ2_XXS qwen3moe-MXFP4 qwen2moe-Q8_0 qwen2moe-IQ4_XS llama-IQ4_NL llama-IQ4_XS llama-MXFP4 llama-IQ2_XXS llama-IQ2_XS llama-IQ2_S llama-IQ3_XXS llama-IQ3_S llama-Q3_K"}
out=engine/testdata/synth-llamacpp
longprompt="Once upon a time there was a little girl named Lily. She loved to play outside in the sun with her dog, a big brown dog called Max. One day they went to the park and found a small red ball under a tree. Lily threw the ball and Max ran after it, and they played until the sky was dark."
# the hybrids' eighth prompt: the seventh five times over (~570 tokens), past one 512-row prefill
# window of the engine and one 512-token batch of llama.cpp
longer="$longprompt $longprompt $longprompt $longprompt $longprompt"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/vkllm" ./cmd/vkllm
# llamacpp-ref.mjs makes 512-token contexts: the eighth prompt needs 1024 (the shorter prompts'
# rows are the same in either)
sed 's/contextSize: 512,/contextSize: 1024,/' "$ref/llamacpp-ref.mjs" >"$ref/llamacpp-ref-1024.mjs"
grep -q 'contextSize: 1024,' "$ref/llamacpp-ref-1024.mjs" || { echo "generate.sh: llamacpp-ref.mjs no longer sets contextSize: 512" >&2; exit 1; }
for m in $models; do
	arch=${m%%-*}
	typ=${m#*-}
	"$tmp/vkllm" synth -o "$tmp/$m.gguf" -arch "$arch" -preset tiny -type "$typ" -seed 7 >/dev/null 2>&1
	# the Gated DeltaNet hybrids get a seventh prompt of more than 64 tokens (llama.cpp splits
	# its recurrence into chunks of 64 tokens, the engine's prompt batches are 32) and an
	# eighth of more than 512
	long= longer5=
	case $arch in qwen35*) long=$longprompt longer5=$longer ;; esac
	node "$ref/llamacpp-ref-1024.mjs" "$tmp/$m.gguf" 16 "Once upon a time" "Hello world" "The little girl and the dog" "There was a cat" "Tom went to the park" "She said hello" ${long:+"$long"} ${longer5:+"$longer5"} >"$out/$m.jsonl"
	echo "$out/$m.jsonl"
done
