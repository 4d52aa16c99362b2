/**
 * Dialling a Unix socket that lives in a folder someone else can change (a sandbox's run folder)
 * without trusting the path: the file is opened with O_PATH | O_NOFOLLOW (a symlink is opened as
 * itself, never followed), its identity checked with fstat, and the connection made through
 * `/proc/self/fd/<fd>`, which names exactly that inode — nothing can be swapped in between.
 *
 * A socket's identity is its device and inode number. While a server listens, its socket file's
 * inode stays allocated (the listener holds it, even when the file is unlinked or renamed), so no
 * other socket can get the same number: checking the identity before connecting is checking who
 * listens.
 */
import { closeSync, constants, fstatSync, openSync } from 'node:fs';
import { connect, type Socket } from 'node:net';

/** Which socket file: device and inode, as decimal strings (they are kept in a file). */
export interface SocketIdentity {
  dev: string;
  ino: string;
}

/** Linux's O_PATH (the same on x86-64 and arm64); Node's fs.constants has no name for it. */
const O_PATH = 0o10000000;

/** The file at the path is not a Unix socket (a symlink, a regular file, a folder). */
export class NotASocketError extends Error {
  override readonly name = 'NotASocketError';
  constructor(
    readonly path: string,
    readonly found: 'a symlink' | 'not a socket',
  ) {
    super(`${path} is ${found}`);
  }
}

export function sameSocket(a: SocketIdentity, b: SocketIdentity): boolean {
  return a.dev === b.dev && a.ino === b.ino;
}

/**
 * Connects to the Unix socket at `path` unless its last component is anything but a socket; the
 * folders above it must be trusted (only the last component is checked). `accept` sees the
 * socket's identity before anything is sent and may throw to refuse it.
 * @throws NotASocketError, or the open error (ENOENT when nothing is there)
 */
export function connectSocketFile(path: string, accept: (identity: SocketIdentity) => void): { socket: Socket; identity: SocketIdentity } {
  const fd = openSync(path, O_PATH | constants.O_NOFOLLOW);
  try {
    const stat = fstatSync(fd, { bigint: true });
    if (!stat.isSocket()) throw new NotASocketError(path, stat.isSymbolicLink() ? 'a symlink' : 'not a socket');
    const identity = { dev: String(stat.dev), ino: String(stat.ino) };
    accept(identity);
    // Node connects a Unix socket within this call (libuv's connect(2) is synchronous for them), so
    // the descriptor may close right after; it names the checked inode, whatever the path holds now.
    return { socket: connect(`/proc/self/fd/${fd}`), identity };
  } finally {
    closeSync(fd);
  }
}
