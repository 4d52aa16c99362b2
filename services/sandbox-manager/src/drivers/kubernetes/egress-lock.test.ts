// The egress lock's script (the init container of every sandbox pod), run for real with this
// machine's iptables in a network namespace of the test's own (`unshare --net`; nothing of the
// host's network changes): afterwards only loopback and the proxy's uid may send.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from '@jest/globals';
import { EGRESS_LOCK_SCRIPT, PROXY_UID } from './manifests.js';

const run = promisify(execFile);

/** Tries a TCP connect as `uid`: refused (the lock's REJECT), timeout (sent into the void), or open. */
const probe = (uid: number, target: string) =>
  `setpriv --reuid=${uid} --regid=${uid} --clear-groups timeout 1 bash -c 'exec 3<>/dev/tcp/${target}' 2>/dev/null; echo "${uid} ${target} $?"`;

describe('egress lock script', () => {
  it("rejects the sandbox's own traffic at once, lets the proxy's uid out, and keeps loopback open to all", async () => {
    const script = [
      'set -e',
      'ip link set lo up',
      // A link out with nobody at the other end: what passes the lock goes unanswered (a connect times out).
      'ip link add v0 type veth peer name v1 && ip addr add 10.99.0.1/24 dev v0 && ip link set v0 up && ip link set v1 up',
      // A listener on loopback (the sidecar's place): a connect to it succeeds (exit 0).
      '(busybox nc -ll -p 3128 -e /bin/true >/dev/null 2>&1 &)',
      // Listening (state 0A on port 0C38) before the lock goes up.
      "until grep -qs ':0C38 [0-9A-F]*:0000 0A' /proc/net/tcp /proc/net/tcp6; do sleep 0.01; done",
      EGRESS_LOCK_SCRIPT,
      'set +e',
      probe(1000, '10.99.0.2/80'),
      probe(0, '10.99.0.2/80'),
      probe(PROXY_UID, '10.99.0.2/80'),
      probe(1000, '127.0.0.1/3128'),
    ].join('\n');
    const { stdout } = await run('unshare', ['--net', 'bash', '-c', script], { timeout: 20_000 });
    const results = Object.fromEntries(
      stdout
        .trim()
        .split('\n')
        .map((line) => line.split(' '))
        .map(([uid, target, code]) => [`${uid} ${target}`, Number(code)]),
    );
    expect(results).toEqual({
      // Rejected: connect fails at once (exit 1), not after the timeout (124).
      '1000 10.99.0.2/80': 1,
      '0 10.99.0.2/80': 1,
      // Let through (and then unanswered): the timeout ends it.
      [`${PROXY_UID} 10.99.0.2/80`]: 124,
      // Loopback stays open to everyone.
      '1000 127.0.0.1/3128': 0,
    });
  });
});
