#!/bin/bash
# uringpipe-cat --to tcp:NAME:PORT where NAME has two addresses and only the
# second listens: the sender must go on from the address that refuses to
# the next one (tools/cat_tcp.c, tcp_connect()), as it would for a
# "localhost" whose ::1 comes first while the receiver listens on 127.0.0.1
# only. The name is this test's own: a network namespace of its own, whose
# hosts file `ip netns exec` binds over /etc/hosts (/etc/netns/NS/hosts),
# says "uptwo" is ::1 and 127.0.0.1. Also: with nobody listening on either,
# the sender reports the refusal once --wait has passed, status 4.
# Needs root and ip(8); skips (77) without them.
. "$(dirname "$0")/lib.sh"
cli_init "$@"

netns_pair upaddr
[ -d /etc/netns ] && had_etc_netns=1 || had_etc_netns=0
netns_extra_cleanup() {
	rm -rf "/etc/netns/$NA"
	[ "$had_etc_netns" = 1 ] || rmdir /etc/netns 2>/dev/null
}
ip -n "$NA" link set lo up || { fail "cannot bring lo up"; cli_done; }
mkdir -p "/etc/netns/$NA" && printf '::1 uptwo\n127.0.0.1 uptwo\n' >"/etc/netns/$NA/hosts" ||
	{ fail "cannot write the namespace's hosts file"; cli_done; }

# The order the resolver gives (the CLI asks it the same way): the
# receiver listens on the second address only.
mapfile -t addrs < <(inA getent ahosts uptwo | awk '$2 == "STREAM" { print $1 }')
if [ "${#addrs[@]}" -ne 2 ]; then
	echo "skip: uptwo resolves to ${#addrs[@]} addresses here, not 2: ${addrs[*]}"
	exit 77
fi
ok "uptwo resolves to ${addrs[0]}, then ${addrs[1]}"
case ${addrs[1]} in *:*) listen="[${addrs[1]}]" ;; *) listen=${addrs[1]} ;; esac

head -c $((4 << 20)) /dev/urandom >"$T/in"
inA "$CAT" -q --wait 20 --from "tcp:$listen:5001" >"$T/out" 2>"$T/rerr" &
RPID=$!
inA "$CAT" -q --wait 10 --to tcp:uptwo:5001 "$T/in" 2>"$T/serr"
expect_eq "second address: sender exit" $? 0
wait "$RPID"
expect_eq "second address: receiver exit" $? 0
same_file "second address: byte-identical" "$T/in" "$T/out"
[ -s "$T/serr" ] && fail "second address: the sender said: $(head -c 300 "$T/serr")"

# Nobody on either: refused, reported after --wait, not a hang.
t0=$(now_s)
inA "$CAT" -q --wait 1 --to tcp:uptwo:5002 "$T/in" 2>"$T/serr2"
expect_eq "nobody listening: sender exit" $? 4
grep -q "nobody listening after 1 s (--wait): Connection refused" "$T/serr2" ||
	fail "nobody listening: message: $(head -c 300 "$T/serr2")"
# printf, not print: awk's default number format keeps 6 digits.
if fcmp "$(now_s)" '<' "$(awk -v t="$t0" 'BEGIN { printf "%.3f", t + 5 }')"; then
	ok "nobody listening: ended within 5 s"
else
	fail "nobody listening: took more than 5 s"
fi
cli_done
