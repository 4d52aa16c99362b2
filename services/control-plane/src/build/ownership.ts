/**
 * Handing a build folder to a deployment's OS user for its install, and taking it back.
 *
 * Both walks run as root inside a tree that an untrusted user owns (or is about to), so they
 * never follow symlinks (`lchown`) and change owners in the order that keeps every folder being
 * read root-owned: entries of a root-owned folder cannot be renamed or swapped for a symlink by
 * the user, so what a walk saw is what it changes.
 */
import { chmod, lchown, lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * Makes `dir` and everything in it owned by `uid`:`gid`. Children first: a folder becomes the
 * user's only once the walk is done with it.
 */
export async function handOver(dir: string, uid: number, gid: number): Promise<void> {
  const entries = await readdir(dir, { withFileTypes: true });
  await Promise.all(
    entries.map((entry) => {
      const path = join(dir, entry.name);
      return entry.isDirectory() ? handOver(path, uid, gid) : lchown(path, uid, gid);
    }),
  );
  await lchown(dir, uid, gid);
}

/**
 * Makes `path` and everything in it root-owned (0:0) and writable by root only: modes are kept
 * except group/other write bits (which would let the user, or anyone, keep writing) and setuid/
 * setgid bits on files (a root-owned setuid file would be a way up to root). A folder first: once
 * it is root's, the user can no longer change what is in it while the walk reads it.
 */
export async function takeBack(path: string): Promise<void> {
  await lchown(path, 0, 0);
  // Read after the chown: until then the user could still chmod it.
  const info = await lstat(path);
  if (info.isSymbolicLink()) return;
  const mode = info.mode & 0o7777;
  const safe = mode & ~0o022 & (info.isDirectory() ? 0o7777 : ~0o6000);
  if (safe !== mode) await chmod(path, safe);
  if (info.isDirectory()) await Promise.all((await readdir(path)).map((name) => takeBack(join(path, name))));
}

/**
 * Runs `work` with `dir` handed to `user`, and takes `dir` back whatever happens (an error of
 * either is thrown; both when both fail).
 */
export async function whileOwnedBy<T>(dir: string, user: { uid: number; gid: number }, work: () => Promise<T>): Promise<T> {
  let result: T;
  try {
    await handOver(dir, user.uid, user.gid);
    result = await work();
  } catch (failure) {
    await takeBack(dir).catch((error: unknown) => {
      // Both matter: why the work failed, and that the folder may still be the user's.
      throw new AggregateError(
        [failure, error],
        `${(failure as Error).message}; taking ${dir} back from uid ${user.uid} failed too: ${(error as Error).message}`,
      );
    });
    throw failure;
  }
  await takeBack(dir);
  return result;
}
