#!/bin/sh
# Compiles every shaders/*.comp to shaders/spv/*.spv with a current glslc.
# glslc: $GLSLC if set, else the one ../shared/tools/get-glslc.sh (or $VKLLM_GET_GLSLC) fetches
# into .tools/vk at the repository root. Usage: shaders/gen.sh [--check]
#   --check  compile into a temporary folder and fail if any committed .spv differs.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
if [ -z "${GLSLC:-}" ]; then
	get=${VKLLM_GET_GLSLC:-$root/../shared/tools/get-glslc.sh}
	if [ ! -x "$root/.tools/vk/bin/glslc" ]; then
		[ -x "$get" ] || { echo "gen.sh: no glslc: set GLSLC or VKLLM_GET_GLSLC (get-glslc.sh)" >&2; exit 1; }
		"$get" "$root/.tools/vk" >/dev/null
	fi
	GLSLC=$root/.tools/vk/bin/glslc
fi
out=$here/spv
check=0
if [ "${1:-}" = "--check" ]; then
	check=1
	out=$(mktemp -d)
	trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
status=0
for src in "$here"/*.comp; do
	name=$(basename "$src" .comp)
	# NV cooperative matrix 2 needs SPIR-V 1.6 (Vulkan 1.3); its tier requires a 1.3 device.
	env=vulkan1.2
	case $name in *_cm2*) env=vulkan1.3 ;; esac
	"$GLSLC" --target-env=$env -O -fshader-stage=compute -I "$here" -o "$out/$name.spv" "$src"
	if [ $check = 1 ] && ! cmp -s "$out/$name.spv" "$here/spv/$name.spv"; then
		echo "gen.sh: shaders/spv/$name.spv is stale: run shaders/gen.sh" >&2
		status=1
	fi
done
if [ $check = 1 ]; then
	for spv in "$here"/spv/*.spv; do
		[ -e "$spv" ] || continue
		name=$(basename "$spv" .spv)
		[ -e "$here/$name.comp" ] || { echo "gen.sh: shaders/spv/$name.spv has no source" >&2; status=1; }
	done
fi
exit $status
