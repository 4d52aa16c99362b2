/**
 * A stand-in for the `node:20-bookworm-slim` base image, for machines that cannot pull it (no
 * registry access): a minimal Debian bookworm made by mmdebstrap from Debian's packages, plus this
 * machine's own Node.js binary and npm, imported into a Podman engine's storage under the base's
 * name. images/Containerfile then builds unchanged against it.
 *
 * It trusts the certificate authorities this machine trusts (its CA bundle replaces Debian's, and
 * NODE_EXTRA_CA_CERTS points Node at it): where the registry is reached through a TLS-inspecting
 * proxy, as on CI machines, npm in a build would otherwise fail with SELF_SIGNED_CERT_IN_CHAIN.
 *
 * The import is labelled with what went into it (Node version, CA bundle); a later call finds it
 * and skips the minute mmdebstrap takes. An image of that name without the label (the real base)
 * is kept.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { PodmanService } from './podman-service.js';
import { run } from './run.js';

export const NODE_BASE_IMAGE = 'docker.io/library/node:20-bookworm-slim';
const LABEL = 'berth.stand-in';
/** Where Debian's nodejs package puts npm; the official image has it under /usr/local. */
const NPM_DIR = '/usr/lib/node_modules/npm';
const CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';

export class NodeBaseImageError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'NodeBaseImageError';
  }
}

/**
 * Makes sure `reference` exists in the engine's storage, building the stand-in when it is missing
 * or was made from another Node. Answers what it did.
 */
export async function ensureNodeBaseImage(
  podman: PodmanService,
  workDir: string,
  options: { reference?: string; mirror?: string } = {},
): Promise<'built' | 'cached' | 'real'> {
  const reference = options.reference ?? NODE_BASE_IMAGE;
  const caDigest = createHash('sha256')
    .update(await readFile(CA_BUNDLE).catch(() => ''))
    .digest('hex')
    .slice(0, 12);
  const fingerprint = `node-${process.version}-ca-${caDigest}`;
  const label = await podman.podman(['image', 'inspect', '--format', `{{index .Labels "${LABEL}"}}`, reference]).then(
    ({ stdout }) => stdout.trim(),
    () => undefined,
  );
  if (label === fingerprint) return 'cached';
  // An image of that name that we did not make (no label) is the real one: keep it. A stand-in made
  // from another Node (another label) is replaced.
  if (label === '' || label === '<no value>') return 'real';
  for (const tool of ['/usr/bin/mmdebstrap', process.execPath, join(NPM_DIR, 'bin/npm-cli.js')]) {
    if (!existsSync(tool))
      throw new NodeBaseImageError(`${tool} is missing: the stand-in base needs mmdebstrap and Debian's nodejs (run scripts/ensure-podman.sh as root)`);
  }
  await rm(workDir, { recursive: true, force: true });
  await mkdir(workDir, { recursive: true });
  const tar = join(workDir, 'rootfs.tar');
  try {
    // minbase + ca-certificates is what the slim image has that matters (npm over TLS); Node's own
    // libraries (libstdc++) come with minbase. The hooks run on this machine with $1 the new root.
    await run(
      'mmdebstrap',
      [
        '--quiet',
        '--variant=minbase',
        '--include=ca-certificates',
        `--customize-hook=copy-in ${process.execPath} /usr/local/bin`,
        '--customize-hook=mkdir -p "$1/usr/local/lib/node_modules"',
        `--customize-hook=copy-in ${NPM_DIR} /usr/local/lib/node_modules`,
        '--customize-hook=ln -s ../lib/node_modules/npm/bin/npm-cli.js "$1/usr/local/bin/npm"',
        '--customize-hook=ln -s ../lib/node_modules/npm/bin/npx-cli.js "$1/usr/local/bin/npx"',
        // The slim image keeps no apt lists or caches either.
        '--customize-hook=rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*',
        ...(existsSync(CA_BUNDLE) ? [`--customize-hook=copy-in ${CA_BUNDLE} /etc/ssl/certs`] : []),
        'bookworm',
        tar,
        options.mirror ?? 'http://deb.debian.org/debian',
      ],
      { timeoutMs: 10 * 60_000 },
    );
    await podman.podman(
      [
        'import',
        '--quiet',
        '--change',
        `LABEL ${LABEL}=${fingerprint}`,
        '--change',
        `ENV NODE_VERSION=${process.version.slice(1)}`,
        '--change',
        `ENV NODE_EXTRA_CA_CERTS=${CA_BUNDLE}`,
        '--change',
        'CMD ["node"]',
        tar,
        reference,
      ],
      5 * 60_000,
    );
  } catch (error) {
    throw new NodeBaseImageError(`could not build the stand-in for ${reference}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  } finally {
    await rm(workDir, { recursive: true, force: true });
  }
  return 'built';
}
