#!/usr/bin/env bash
# MinIO for Spillway's tests and development, built from source at the
# version the Makefile pins (MINIO_VERSION), into <repo>/.tools/bin.
#
#   deploy/local/minio.sh install     build it; skipped when already built
#   deploy/local/minio.sh start DIR   run it on 127.0.0.1 (data and generated
#                                     credentials under DIR), printing the
#                                     environment Spillway needs; Ctrl-C stops it
#   deploy/local/minio.sh env DIR     print that environment again
#
# Environment: MINIO_PORT (9000), MINIO_CONSOLE_PORT (9001), MINIO_BUCKET
# (spillway), SPILLWAY_MINIO (use this binary instead of building one),
# MINIO_VERSION (override the Makefile's pin), GO (go).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin_dir=$root/.tools/bin
stamp_dir=$root/.tools/stamps
go=${GO:-go}
version=${MINIO_VERSION:-$(sed -n 's/^MINIO_VERSION[[:space:]]*:=[[:space:]]*//p' "$root/Makefile")}
[[ -n $version ]] || { echo "minio.sh: no MINIO_VERSION in $root/Makefile" >&2; exit 1; }
stamp=$stamp_dir/minio-$version
minio=${SPILLWAY_MINIO:-$bin_dir/minio}

usage() { sed -n '2,15s/^# \{0,1\}//p' "$0" >&2; exit 2; }

# built reports whether $bin_dir/minio is the pinned version, by the module
# version the Go toolchain recorded in it.
built() {
	[[ -x $bin_dir/minio ]] &&
		"$go" version -m "$bin_dir/minio" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+github.com/minio/minio[[:space:]]+$version([[:space:]]|\$)"
}

install() {
	if [[ -f $stamp && -x $bin_dir/minio ]]; then
		echo "minio $version: up to date in $bin_dir"
		return
	fi
	mkdir -p "$bin_dir" "$stamp_dir"
	# One build at a time (make -j, a second shell): wait for the other.
	exec 9>"$stamp_dir/minio.lock"
	if command -v flock >/dev/null; then
		flock 9
	fi
	if ! built; then
		echo "minio $version: building into $bin_dir (about 5 minutes on 2 cores)"
		GOBIN=$bin_dir "$go" install "github.com/minio/minio@$version"
		built || { echo "minio.sh: $bin_dir/minio is not $version after the build" >&2; exit 1; }
	fi
	touch "$stamp"
	echo "minio $version: installed in $bin_dir"
}

credentials() {
	local dir=$1 file=$1/credentials
	mkdir -p "$dir/data"
	if [[ ! -f $file ]]; then
		(
			umask 077
			printf 'MINIO_ROOT_USER=spillway-dev\nMINIO_ROOT_PASSWORD=%s\n' \
				"$(od -An -tx1 -N20 /dev/urandom | tr -d ' \n')" >"$file"
		)
	fi
	# shellcheck disable=SC1090
	source "$file"
	MINIO_ROOT_USER=${MINIO_ROOT_USER:?} MINIO_ROOT_PASSWORD=${MINIO_ROOT_PASSWORD:?}
}

print_env() {
	local port=${MINIO_PORT:-9000} bucket=${MINIO_BUCKET:-spillway}
	cat <<ENV
export AWS_ACCESS_KEY_ID=$MINIO_ROOT_USER
export AWS_SECRET_ACCESS_KEY=$MINIO_ROOT_PASSWORD
export SPILLWAY_STORE='s3://$bucket?endpoint=127.0.0.1:$port&secure=false&create=true'
export SPILLWAY_MINIO_ENDPOINT=127.0.0.1:$port
ENV
}

start() {
	local dir=$1
	[[ -n ${SPILLWAY_MINIO:-} ]] || install >&2
	credentials "$dir"
	local port=${MINIO_PORT:-9000} console=${MINIO_CONSOLE_PORT:-9001}
	{
		echo "# MinIO on http://127.0.0.1:$port (console http://127.0.0.1:$console), data in $dir/data."
		echo "# In another shell: eval \"\$($0 env $dir)\"; then spillway serve uses it:"
		print_env
	}
	export MINIO_ROOT_USER MINIO_ROOT_PASSWORD MINIO_UPDATE=off
	exec "$minio" server --quiet --address "127.0.0.1:$port" --console-address "127.0.0.1:$console" "$dir/data"
}

case ${1:-} in
install) [[ $# -eq 1 ]] || usage; install ;;
start) [[ $# -eq 2 ]] || usage; start "$2" ;;
env) [[ $# -eq 2 ]] || usage; credentials "$2"; print_env ;;
*) usage ;;
esac
