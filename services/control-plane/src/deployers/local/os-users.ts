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
 * Ids are claimed host-wide, one file per id in a root-only registry that every Berth
 * installation on the machine shares (`/var/lib/berth/uids/<uid>`, created with O_EXCL, naming
 * the installation and the deployment), so two installations never hand out the same id. Ids are
 * never reused: files a deleted deployment left behind stay out of a new deployment's reach.
 */
import { constants } from 'node:fs';
import { chmod, chown, mkdir, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';

export interface OsUsersOptions {
  /** Folder of the private homes (`<dir>/<deploymentId>`). */
  homesDir: string;
  /** Folder of the built revisions (`<dir>/<deploymentId>/<revision>/`). */
  artifactsDir: string;
  /**
   * First user (and group) id handed out; ids count up from it.
   * @default 1500000 (above the ranges distributions give users and subordinate ids)
   */
  firstUid?: number;
  /**
   * The host-wide registry of claimed ids, shared by every installation on this machine.
   * @default /var/lib/berth/uids
   */
  registryDir?: string;
}

/** Where the ids of every Berth installation on this machine are claimed. */
export const DEFAULT_UID_REGISTRY = '/var/lib/berth/uids';

/** The identity one deployment's agent server runs as. */
export interface DeploymentUser {
  uid: number;
  gid: number;
  /** Its private, writable folder (HOME and TMPDIR). */
  home: string;
}

/**
 * How local agent servers are isolated here: in containers of their own (as their OS users), as
 * OS users of their own only (and why not in containers), or not at all (and why).
 */
export type IsolationMode = { kind: 'container' } | { kind: 'os-user'; reason?: string } | { kind: 'none'; reason: string };

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
      return {
        kind: 'none',
        reason: `${blocked} is not readable by other users, so agent servers cannot run as users of their own: install Berth in a folder others can read (not under /root or a 0700 folder)`,
      };
    }
  }
  const closed = stateDir ? await closedFolder(stateDir) : undefined;
  if (closed) {
    return {
      kind: 'none',
      reason: `${closed} does not let other users pass, so agent servers cannot reach their builds under ${stateDir}: keep the state folder in a folder others can traverse`,
    };
  }
  return { kind: 'os-user' };
}

/** The first existing folder from `dir` up to / that other users cannot traverse, if any. */
async function closedFolder(dir: string): Promise<string | undefined> {
  for (; ; dir = dirname(dir)) {
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
  private readonly registry: string;

  constructor(private readonly options: OsUsersOptions) {
    this.firstUid = options.firstUid ?? 1_500_000;
    this.registry = options.registryDir ?? DEFAULT_UID_REGISTRY;
  }

  /** The deployment's user, claimed on first use; its home exists and is private. */
  async userFor(deploymentId: string): Promise<DeploymentUser> {
    const home = join(this.options.homesDir, deploymentId);
    await mkdir(this.registry, { recursive: true, mode: 0o700 });
    await mkdir(this.options.homesDir, { recursive: true });
    // Others may pass through to their own home, but not list whose homes exist.
    await chmod(this.options.homesDir, 0o711);
    const existing = await ownerOf(home);
    if (existing !== undefined) {
      if (await this.holds(existing, deploymentId)) return { uid: existing, gid: existing, home };
      // Its id is another installation's (both claimed it before ids were claimed host-wide): a
      // new id, and a new home, since the other installation's deployment may own files there.
      await rm(home, { recursive: true, force: true });
    }
    const uid = await this.claim(deploymentId);
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
    const own = join(this.options.artifactsDir, deploymentId);
    try {
      await chown(own, 0, user.gid);
    } catch (error) {
      // No build of it here: nothing to grant (starting it says what is missing).
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw error;
    }
    await chmod(this.options.artifactsDir, 0o711);
    await chmod(own, 0o750);
  }

  /** What a claim file says: which installation and deployment hold the id. */
  private claimText(deploymentId: string): string {
    return `${resolve(this.options.homesDir)}\n${deploymentId}\n`;
  }

  /** Claims the next free id host-wide for the deployment. */
  private async claim(deploymentId: string): Promise<number> {
    let uid = this.firstUid + (await readdir(this.registry)).length;
    for (;;) {
      try {
        await writeFile(join(this.registry, String(uid)), this.claimText(deploymentId), { flag: 'wx', mode: 0o600 });
        return uid;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        uid += 1;
      }
    }
  }

  /**
   * Whether `uid` is the deployment's in the registry. An id its home has but the registry lacks
   * (claimed before the registry was host-wide) is registered now, when no one else holds it.
   */
  private async holds(uid: number, deploymentId: string): Promise<boolean> {
    const file = join(this.registry, String(uid));
    const mine = this.claimText(deploymentId);
    try {
      await writeFile(file, mine, { flag: 'wx', mode: 0o600 });
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    return (await readFile(file, 'utf8')) === mine;
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
