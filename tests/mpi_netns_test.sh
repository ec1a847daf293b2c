#!/usr/bin/env bash
# Two "hosts" on this machine: two network namespaces joined by a veth pair,
# Open MPI over TCP only between them (btl tcp,self), launched without ssh
# (plm_rsh_agent runs the remote daemon with `ip netns exec`). One rank per
# host: training gives the weights of one rank, generation the output of one
# process. Namespaces, veth and scripts are removed on exit.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi_lib.sh"
if ! why=$(mpi_available); then skip "two-host run: $why"; finish; fi
[ "$(id -u)" = 0 ] || { skip "two-host run: needs root (ip netns)"; finish; }
command -v ip >/dev/null || { skip "two-host run: no 'ip' (iproute2)"; finish; }

A=dsA$$ B=dsB$$ VA=dsva$$ VB=dsvb$$
NET=10.231.$(( $$ % 200 + 20 ))
cleanup() {
  ip netns del "$A" 2>/dev/null
  ip netns del "$B" 2>/dev/null
  ip link del "$VA" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
setup() {
  ip netns add "$A" && ip netns add "$B" &&
    ip link add "$VA" type veth peer name "$VB" &&
    ip link set "$VA" netns "$A" && ip link set "$VB" netns "$B" &&
    ip -n "$A" addr add "$NET.1/24" dev "$VA" && ip -n "$B" addr add "$NET.2/24" dev "$VB" &&
    ip -n "$A" link set "$VA" up && ip -n "$B" link set "$VB" up &&
    ip -n "$A" link set lo up && ip -n "$B" link set lo up
}
if ! setup 2>"$TMP/setup.log"; then
  fail "network namespaces: $(cat "$TMP/setup.log")"
  finish
fi
ip -n "$A" route get "$NET.2" 2>/dev/null | grep -q "dev $VA" && pass "veth link between the namespaces" ||
  fail "no route $NET.1 -> $NET.2"

# The "ssh" of Open MPI: `agent HOST COMMAND...` runs COMMAND in HOST's namespace.
cat > "$TMP/agent" <<AGENT
#!/bin/sh
host=\$1; shift
case "\$host" in
  $NET.1) ns=$A ;;
  $NET.2) ns=$B ;;
  *) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" sh -c "\$*"
AGENT
chmod +x "$TMP/agent"
printf '%s slots=1\n%s slots=1\n' "$NET.1" "$NET.2" > "$TMP/hosts"
HOSTS=(mpirun --hostfile "$TMP/hosts" -n 2 --bind-to none --mca plm_rsh_agent "$TMP/agent"
       --mca btl tcp,self --mca btl_tcp_if_include "$NET.0/24" --mca oob_tcp_if_include "$NET.0/24"
       -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM -x TMPDIR -x PATH)
run2() { ip netns exec "$A" "${HOSTS[@]}" "$@"; }

# Each rank reports its namespace's address: one rank per host.
run2 sh -c 'ip -4 -o addr show | grep -o "10\.231\.[0-9]*\.[0-9]*" | head -1' > "$TMP/where" 2>"$TMP/where.log"
[ "$(sort "$TMP/where" | tr '\n' ' ')" = "$NET.1 $NET.2 " ] && pass "one rank in each namespace" ||
  fail "ranks ran at: $(cat "$TMP/where") $(tail -5 "$TMP/where.log")"

head -n 201 "$ROOT/examples/telco_churn_2k.csv" > "$TMP/t.csv"
ARGS=(--input "$TMP/t.csv" --field-delimiter , --tokenizer char --epochs 2 --embedding-dim 16
      --rnn-units 32 --batch-size 8 --seq-length 32 --seed 5 --threads 1)
"${MPIRUN[@]}" -n 1 "$DS" train "${ARGS[@]}" --model-dir "$TMP/one" >/dev/null 2>&1 || fail "one rank"
run2 "$DS" train "${ARGS[@]}" --model-dir "$TMP/two" >/dev/null 2>"$TMP/train.log" ||
  fail "two-host training: $(tail -5 "$TMP/train.log")"
grep -q "summed by MPI_Reduce_scatter, optimizer sharded over the ranks (MPI_Allgatherv)" "$TMP/train.log" &&
  pass "two hosts: the gradients summed by MPI_Reduce_scatter, the optimizer sharded" ||
  fail "sum path: $(grep '^mpi:' "$TMP/train.log")"
cmp -s "$(weights "$TMP/one")" "$(weights "$TMP/two")" && pass "two hosts over TCP: the weights of one rank" ||
  fail "weights differ across hosts"
"$DS" generate --model-dir "$TMP/one" --num-lines 300 --seed 2 -o "$TMP/one.csv" 2>/dev/null
run2 "$DS" generate --model-dir "$TMP/one" --num-lines 300 --seed 2 -o "$TMP/two.csv" >/dev/null 2>"$TMP/gen.log" ||
  fail "two-host generation: $(tail -5 "$TMP/gen.log")"
cmp -s "$TMP/one.csv" "$TMP/two.csv" && pass "two hosts: generation byte-identical to one process" ||
  fail "generated output differs"
finish
