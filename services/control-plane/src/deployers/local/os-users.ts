/**
 * OS users for local agent servers. When the platform runs as root, each deployment's agent
 * server runs under a user id of its own (no entry in /etc/passwd is needed: the kernel only
 * knows numbers), with:
 *
 * - a private home `<homesDir>/<deploymentId>` (0700, its own) for HOME and TMPDIR;
 * - read-only access to its own built revisions: `<artifactsDir>/<deploymentId>` is root-owned,
 *   group = the deployment's gid, mode 0750 — other deployments cannot enter it, and nothing in
 *   it is writable by the agent (its code cannot be changed under it, nor the shared
 *   dependency cache whose files its node_modules hard-link to);
 * - nothing else of the platform: the state folder's secret key and credentials are 0600 root,
 *   Postgres' files belong to `postgres`.
 *
 * Ids are claimed atomically, one file per id under `<homesDir>/.uids/` (O_EXCL), and never
 * reused: files a deleted deployment left behind stay out of a new deployment's reach.
 */
import { constants } from 'node:fs';
import { chmod, chown, mkdir, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';

export interface OsUsersOptions {
  /** Folder of the private homes (`<dir>/<deploymentId>`) and of the id claims (`<dir>/.uids/`). */
  homesDir: string;
  /** Folder of the built revisions (`<dir>/<deploymentId>/<revision>/`). */
  artifactsDir: string;
  /**
   * First user (and group) id handed out; ids count up from it.
   * @default 1500000 (above the ranges distributions give users and subordinate ids)
   */
  firstUid?: number;
}

/** The identity one deployment's agent server runs as. */
export interface DeploymentUser {
  uid: number;
  gid: number;
  /** Its private, writable folder (HOME and TMPDIR). */
  home: string;
}

/** Whether local agent servers can run isolated here, and if not, why. */
export type IsolationMode = { kind: 'os-user' } | { kind: 'none'; reason: string };

/**
 * `os-user` when this process is root, every file an agent server must load (the node binary, the
 * agent server script and the installation around it) is readable by other users, and `stateDir`
 * (where builds and homes go; it may not exist yet) and the folders on the way to it let them pass.
 */
export async function detectIsolation(runtimeFiles: string[], stateDir?: string): Promise<IsolationMode> {
  if (process.getuid?.() !== 0) {
    return { kind: 'none', reason: 'the platform does not run as root, so agent servers run as its own user (see docs/security.md)' };
  }
  for (const file of runtimeFiles) {
    const blocked = (await stat(file)).mode & constants.S_IROTH ? await closedFolder(dirname(file)) : file;
    if (blocked) {
      return { kind: 'none', reason: `${blocked} is not readable by other users, so agent servers cannot run as users of their own: install Berth in a folder others can read (not under /root or a 0700 folder)` };
    }
  }
  const closed = stateDir ? await closedFolder(stateDir) : undefined;
  if (closed) {
    return { kind: 'none', reason: `${closed} does not let other users pass, so agent servers cannot reach their builds under ${stateDir}: keep the state folder in a folder others can traverse` };
  }
  return { kind: 'os-user' };
}

/** The first existing folder from `dir` up to / that other users cannot traverse, if any. */
async function closedFolder(dir: string): Promise<string | undefined> {
  for (;; dir = dirname(dir)) {
    try {
      if (!((await stat(dir)).mode & constants.S_IXOTH)) return dir;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    if (dirname(dir) === dir) return undefined;
  }
}

export class OsUsers {
  private readonly firstUid: number;

  constructor(private readonly options: OsUsersOptions) {
    this.firstUid = options.firstUid ?? 1_500_000;
  }

  /** The deployment's user, claimed on first use; its home exists and is private. */
  async userFor(deploymentId: string): Promise<DeploymentUser> {
    const home = join(this.options.homesDir, deploymentId);
    const claims = join(this.options.homesDir, '.uids');
    await mkdir(claims, { recursive: true, mode: 0o700 });
    // Others may pass through to their own home, but not list whose homes exist.
    await chmod(this.options.homesDir, 0o711);
    const existing = await ownerOf(home);
    if (existing !== undefined) return { uid: existing, gid: existing, home };
    let uid = this.firstUid + (await readdir(claims)).length;
    for (;;) {
      try {
        await writeFile(join(claims, String(uid)), deploymentId, { flag: 'wx', mode: 0o600 });
        break;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        uid += 1;
      }
    }
    try {
      await mkdir(home, { mode: 0o700 });
    } catch (error) {
      // Another control plane claimed an id for this deployment at the same time: its id wins.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const winner = await ownerOf(home);
      if (winner !== undefined) return { uid: winner, gid: winner, home };
    }
    await chown(home, uid, uid);
    await chmod(home, 0o700);
    return { uid, gid: uid, home };
  }

  /** Lets the deployment's user read (not write) its own built revisions and nothing else there. */
  async grantArtifacts(deploymentId: string, user: DeploymentUser): Promise<void> {
    await chmod(this.options.artifactsDir, 0o711);
    const own = join(this.options.artifactsDir, deploymentId);
    await chown(own, 0, user.gid);
    await chmod(own, 0o750);
  }

  /** Removes the deployment's home (its id stays claimed, see above). */
  async remove(deploymentId: string): Promise<void> {
    await rm(join(this.options.homesDir, deploymentId), { recursive: true, force: true });
  }
}

/** The owner of a home folder, or undefined when there is none yet (root-owned: half-made). */
async function ownerOf(home: string): Promise<number | undefined> {
  try {
    const { uid } = await stat(home);
    return uid === 0 ? undefined : uid;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}
