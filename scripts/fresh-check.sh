#!/usr/bin/env bash
# The clean-room check: the README's two commands on a fresh Debian 12 (bookworm).
#
# Builds a minimal bookworm root with debootstrap in a folder of the build tree, copies a clean
# clone of the current commit into it and runs, as root in a chroot with /proc, /sys and /dev
# mounted and an empty environment:
#   1. scripts/setup.sh && scripts/demo.sh   (stopped with Ctrl-C's SIGINT after its sample answer;
#                                             it must exit 0 and leave its ports free)
#   2. scripts/setup.sh && scripts/test.sh
# Each step's time is printed; the first failure ends the check with a non-zero status.
# Needs root (debootstrap, mount, chroot) and the Debian and PyPI registries.
#
#   scripts/fresh-check.sh                 # root in build/fresh-root, removed afterwards
#   scripts/fresh-check.sh --keep          # keep the root (to look around: chroot build/fresh-root)
#   scripts/fresh-check.sh --no-ccache     # do not share the host's compiler cache (slower)
#   FRESH_ROOT=/some/dir scripts/fresh-check.sh
#
# Only committed work is checked: the clone is of HEAD, as a newcomer would get it.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD

KEEP=0
SHARE_CCACHE=1
for arg in "$@"; do
  case "$arg" in
    --keep) KEEP=1 ;;
    --no-ccache) SHARE_CCACHE=0 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "fresh-check: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done

ROOT=${FRESH_ROOT:-$SRC/build/fresh-root}
MIRROR=${FRESH_MIRROR:-http://deb.debian.org/debian}
HOST_CCACHE=${CCACHE_DIR:-$HOME/.cache/ccache}
DEMO_TIMEOUT_S=${FRESH_DEMO_TIMEOUT_S:-3600}
start=$(date +%s)
step_start=$start
LOG_DIR=$(dirname "$ROOT")/fresh-logs

stamp() { echo "== [$(( $(date +%s) - start ))s] $*"; }
step() { step_start=$(date +%s); stamp "$*"; }
step_done() { echo "   done in $(( $(date +%s) - step_start ))s"; }
fail() { echo "fresh-check: FAILED: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || fail "needs root (debootstrap, mount and chroot)"

mounted=()
unmount_all() {
  local i
  for (( i=${#mounted[@]}-1; i>=0; i-- )); do
    umount -l "${mounted[$i]}" 2>/dev/null || true
  done
  mounted=()
}
cleanup() {
  local rc=$?
  # A demo still running inside the root would hold the mounts and the ports.
  [ -n "${DEMO_PID:-}" ] && kill -TERM -- "-$DEMO_PID" 2>/dev/null && wait "$DEMO_PID" 2>/dev/null
  unmount_all
  if [ "$KEEP" -eq 0 ] && [ -d "$ROOT" ]; then
    rm -rf --one-file-system "$ROOT"
  fi
  stamp "fresh-check finished with status $rc"
  exit "$rc"
}
trap cleanup EXIT

bind() {  # bind SRC DEST: mount SRC on DEST inside the root
  mkdir -p "$2"
  mount --bind "$1" "$2"
  mounted+=("$2")
}

step "a fresh bookworm root in $ROOT ($MIRROR)"
if ! command -v debootstrap >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi
if [ -d "$ROOT" ]; then
  for m in $(awk -v r="$ROOT" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r); do umount -l "$m"; done
  rm -rf --one-file-system "$ROOT"
fi
mkdir -p "$ROOT" "$LOG_DIR"
debootstrap --variant=minbase bookworm "$ROOT" "$MIRROR" > "$LOG_DIR/debootstrap.log" 2>&1 \
  || { tail -20 "$LOG_DIR/debootstrap.log"; fail "debootstrap"; }
# The network as this machine sees it, which a new machine on the same network has before any
# project step: its DNS, its local CA certificates (a TLS-inspecting proxy's, for instance) and
# pip's global configuration. No package or project file comes from the host.
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
# What the Debian installer writes on every new machine and debootstrap leaves out: without it
# "localhost" does not resolve (Selenium reaches chromedriver by that name).
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' > "$ROOT/etc/hosts"
if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
  mkdir -p "$ROOT/usr/local/share/ca-certificates" "$ROOT/etc/ssl/certs"
  cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
  [ -f /etc/ssl/certs/ca-certificates.crt ] && cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/"
fi
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$ROOT/etc/pip.conf"
step_done

step "a clean clone of $(git rev-parse --short HEAD) in /work/streamline"
git clone --quiet --no-hardlinks "$SRC" "$ROOT/work/streamline"
git -C "$ROOT/work/streamline" checkout --quiet "$(git rev-parse HEAD)"
step_done

mount -t proc proc "$ROOT/proc"; mounted+=("$ROOT/proc")
mount -t sysfs sys "$ROOT/sys"; mounted+=("$ROOT/sys")
bind /dev "$ROOT/dev"
bind /dev/pts "$ROOT/dev/pts"
# A booted machine has /dev/shm as a tmpfs of its own (POSIX shared memory lives there).
mount -t tmpfs -o mode=1777,nosuid,nodev shm "$ROOT/dev/shm"; mounted+=("$ROOT/dev/shm")
CCACHE_ENV=()
if [ "$SHARE_CCACHE" -eq 1 ]; then
  mkdir -p "$HOST_CCACHE"
  bind "$HOST_CCACHE" "$ROOT/root/.cache/ccache"
  # The root's compiler is a new file with a new mtime: compare compilers by content so the
  # shared cache still hits.
  CCACHE_ENV=(CCACHE_COMPILERCHECK=content)
fi

# An empty environment, as on a new machine.
in_root() {
  chroot "$ROOT" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${CCACHE_ENV[@]}" "$@"
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in 8000 8001 8002; do port_free "$p" || fail "port $p is in use on this machine; the demo needs it"; done

step "README, main job: scripts/setup.sh && scripts/demo.sh (until its sample answer, then Ctrl-C)"
DEMO_LOG=$LOG_DIR/demo.log
: > "$DEMO_LOG"  # exists before the loop below first reads it
# As from a terminal: the demo runs as its own process group (job control on, so SIGINT is not
# ignored as it is for a plain background command), and Ctrl-C is a SIGINT to that group. chroot
# is started directly (not through in_root) so that $! is the process that becomes demo.sh.
set -m
chroot "$ROOT" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${CCACHE_ENV[@]}" \
  /bin/bash -c 'cd /work/streamline && scripts/setup.sh && exec scripts/demo.sh' > "$DEMO_LOG" 2>&1 &
DEMO_PID=$!
set +m
answered=0
for (( i=0; i<DEMO_TIMEOUT_S; i++ )); do
  # The answer is printed as one line after "Its answer"; the next line follows it.
  if grep -q '^Also: ' "$DEMO_LOG"; then answered=1; break; fi
  kill -0 "$DEMO_PID" 2>/dev/null || break
  sleep 1
done
if [ "$answered" -ne 1 ]; then
  tail -40 "$DEMO_LOG"
  fail "the demo ended or timed out before its sample answer (log: $DEMO_LOG)"
fi
sed -n '/^Serving /,/^Also: /p' "$DEMO_LOG" | cut -c1-200
grep -q '"outputs"' "$DEMO_LOG" || fail "the sample answer has no outputs (log: $DEMO_LOG)"
kill -INT -- "-$DEMO_PID"
demo_rc=0
wait "$DEMO_PID" || demo_rc=$?
DEMO_PID=
[ "$demo_rc" -eq 0 ] || { tail -20 "$DEMO_LOG"; fail "the demo exited with $demo_rc on Ctrl-C"; }
for p in 8000 8001 8002; do port_free "$p" || fail "port $p still in use after the demo ended"; done
echo "   the demo exited 0 on SIGINT; ports 8000-8002 are free"
step_done

step "README, tests: scripts/setup.sh && scripts/test.sh"
TEST_LOG=$LOG_DIR/test.log
if ! in_root /bin/bash -c 'cd /work/streamline && scripts/setup.sh && scripts/test.sh' > "$TEST_LOG" 2>&1; then
  grep -E 'tests passed|tests failed|Failed|\*\*\*' "$TEST_LOG" | tail -40
  fail "the test command (log: $TEST_LOG)"
fi
grep -E 'tests passed|Total Test time' "$TEST_LOG"
step_done

stamp "fresh-check passed: both README commands on a fresh bookworm root"
