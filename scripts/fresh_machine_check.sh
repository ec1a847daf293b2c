#!/usr/bin/env bash
# Checks the README's promise "from a fresh clone on Debian 12": builds a bare
# Debian 12 (bookworm) root with debootstrap, copies the current tree into it
# (committed files plus uncommitted changes to tracked files, no build dirs),
# and runs the README's two commands in it under chroot:
#   ./scripts/demo.sh     then     ./scripts/test.sh
# Prints each step's time and a summary; exits non-zero when a step fails.
# Mounts (/proc, /sys, /dev, /dev/pts, /dev/shm) live in a private mount
# namespace and are also unmounted by a trap, so nothing is left mounted even
# when a step fails or the script is interrupted.
#
# Run as root (debootstrap and chroot need it), from anywhere in the clone:
#   sudo nice scripts/fresh_machine_check.sh
# Environment:
#   FRESH_DIR      work directory (default: a new /var/tmp/datasynth-fresh.XXXXXX)
#   FRESH_KEEP=1   keep the root afterwards (default: removed)
#   FRESH_MIRROR   Debian mirror (default: the bookworm mirror of this machine's
#                  apt configuration, else http://deb.debian.org/debian)
#   FRESH_CACHE    directory kept between runs for downloaded .deb files only
#                  (debootstrap's and apt's); the root itself is always new
#   FRESH_STEPS    steps to run inside the root (default: "demo test")
#   FRESH_STEP_TIMEOUT  seconds each of those may run (default 5400): a hung step fails
# Needs: debootstrap (apt-get install debootstrap), util-linux (unshare).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)

if [ "$(id -u)" -ne 0 ]; then
  echo "fresh_machine_check: must run as root (debootstrap, chroot, mount)" >&2
  exit 2
fi
# Re-exec in a private mount namespace: the mounts vanish with the process.
if [ -z "${FRESH_IN_NS:-}" ]; then
  FRESH_IN_NS=1 exec unshare --mount --propagation private bash "$0" "$@"
fi
command -v debootstrap >/dev/null || { echo "fresh_machine_check: install debootstrap" >&2; exit 2; }

WORK=${FRESH_DIR:-$(mktemp -d /var/tmp/datasynth-fresh.XXXXXX)}
mkdir -p "$WORK"
ROOT=$WORK/root
STEPS=${FRESH_STEPS:-demo test}
MOUNTS=()
SUMMARY=()
CHILD=""
START=$(date +%s)

in_root_pids() {  # the processes whose root directory is this root
  local p
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$ROOT" ] && echo "${p#/proc/}"
  done
  return 0
}

cleanup() {
  local rc=$? i pids
  set +e
  if [ -n "$CHILD" ]; then  # a step still running: stop it before unmounting
    kill -TERM "$CHILD" 2>/dev/null
    wait "$CHILD" 2>/dev/null
  fi
  for i in 1 2 3 4 5 6 7 8 9 10 11; do  # and whatever it left running in the root
    pids=$(in_root_pids)
    [ -z "$pids" ] && break
    # shellcheck disable=SC2086
    if [ "$i" -lt 11 ]; then kill -TERM $pids 2>/dev/null; sleep 1; else kill -KILL $pids 2>/dev/null; sleep 1; fi
  done
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
    umount -l "${MOUNTS[$i]}" 2>/dev/null || true
  done
  if [ "${FRESH_KEEP:-0}" = 1 ]; then
    echo "fresh_machine_check: root kept at $ROOT" >&2
  else
    rm -rf --one-file-system "$WORK" || echo "fresh_machine_check: could not remove $WORK" >&2
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mirror() {  # the bookworm mirror this machine's apt uses
  if [ -n "${FRESH_MIRROR:-}" ]; then echo "$FRESH_MIRROR"; return; fi
  local uri
  uri=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 2>/dev/null |
        awk '$2 == "bookworm" { print $1; exit }')
  echo "${uri:-http://deb.debian.org/debian}"
}

step() {  # name command...: runs it, prints and records its time
  local name=$1 t0 t1 rc=0
  shift
  echo "=== step $name: $(date -u +%H:%M:%S) ===" >&2
  t0=$(date +%s)
  "$@" || rc=$?
  t1=$(date +%s)
  SUMMARY+=("$(printf '%-12s %6ss  %s' "$name" $((t1 - t0)) "$([ $rc -eq 0 ] && echo ok || echo "FAILED (exit $rc)")")")
  echo "=== step $name: $((t1 - t0)) s, exit $rc ===" >&2
  if [ $rc -ne 0 ]; then summary; exit $rc; fi
}

summary() {
  echo "--- fresh_machine_check summary ($(date -u '+%Y-%m-%d %H:%M UTC'), total $(( $(date +%s) - START )) s) ---"
  printf '%s\n' "${SUMMARY[@]}"
}

bootstrap() {
  local cache=() m
  m=$(mirror)
  if [ -n "${FRESH_CACHE:-}" ]; then
    mkdir -p "$FRESH_CACHE/debootstrap" || return 1
    cache=(--cache-dir="$FRESH_CACHE/debootstrap")
  fi
  echo "debootstrap: bookworm minbase from $m" >&2
  debootstrap --variant=minbase "${cache[@]}" bookworm "$ROOT" "$m" >"$WORK/debootstrap.log" 2>&1 ||
    { tail -n 30 "$WORK/debootstrap.log" >&2; return 1; }
}

copy_tree() {  # the clone as git has it: HEAD plus changes to tracked files
  local rev
  rev=$(git -C "$REPO" stash create 2>/dev/null || true)
  rev=${rev:-HEAD}
  mkdir -p "$ROOT/root/datasynth" || return 1
  git -C "$REPO" archive --format=tar "$rev" | tar -x -C "$ROOT/root/datasynth" || return 1
  echo "copied $(git -C "$REPO" rev-parse --short HEAD)$([ "$rev" = HEAD ] || echo ' + uncommitted changes')" \
       "($(du -sh "$ROOT/root/datasynth" | cut -f1))" >&2
}

mnt() {  # mount args... target: mounts and remembers the target for cleanup
  mount "$@" || return 1
  MOUNTS+=("${@: -1}")
}

mount_fs() {
  # The root a mount point of its own, as / is on a real machine (ip netns exec
  # runs `mount --make-rslave /`, which fails on a plain directory).
  mnt --bind "$ROOT" "$ROOT" || return 1
  mnt -t proc proc "$ROOT/proc" || return 1
  mnt -t sysfs sysfs "$ROOT/sys" || return 1
  mnt --bind /dev "$ROOT/dev" || return 1
  mnt -t devpts -o newinstance,ptmxmode=0666 devpts "$ROOT/dev/pts" || return 1
  mnt -t tmpfs -o mode=1777 shm "$ROOT/dev/shm" || return 1
  if [ -n "${FRESH_CACHE:-}" ]; then
    mkdir -p "$FRESH_CACHE/apt" &&
      mnt --bind "$FRESH_CACHE/apt" "$ROOT/var/cache/apt/archives" || return 1
  fi
  cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf"
  # This machine's network trust, as a new machine on the same network has it:
  # local CA certificates (an egress proxy's) and pip's settings, so that
  # apt-get and pip (scripts/test_python.sh) reach their indexes.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    mkdir -p "$ROOT/usr/local/share/ca-certificates" "$ROOT/etc/ssl/certs"
    cp -L /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
    [ -f /etc/ssl/certs/ca-certificates.crt ] &&
      cp -L /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"
  fi
  [ -f /etc/pip.conf ] && cp -L /etc/pip.conf "$ROOT/etc/pip.conf"
  return 0
}

stamp() {  # prefixes each line with the seconds since the step began
  local t0=$SECONDS line
  while IFS= read -r line; do printf '[%5ds] %s\n' $((SECONDS - t0)) "$line"; done
}

in_root() {  # script: runs it in the root as a new user's login would
  # In the background and waited for, so that a signal reaches the traps at once;
  # cleanup then stops the step (timeout passes the signal on to the whole step).
  timeout --kill-after=30 "${FRESH_STEP_TIMEOUT:-5400}" chroot "$ROOT" /usr/bin/env -i \
    HOME=/root LANG=C.UTF-8 TERM=dumb PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/bash -c "cd /root/datasynth && ./scripts/$1.sh" > >(stamp) 2>&1 &
  CHILD=$!
  local rc=0
  wait "$CHILD" || rc=$?
  CHILD=""
  return $rc
}

echo "fresh_machine_check: $(date -u '+%Y-%m-%d %H:%M UTC'), work dir $WORK" >&2
step debootstrap bootstrap
step copy copy_tree
step mount mount_fs
for s in $STEPS; do
  step "$s.sh" in_root "$s"
done
summary
echo "fresh_machine_check: PASS"
