import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile, stat } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ARTIFACT_FETCH_SCRIPT } from '../index.js';
import { ArtifactChecksumError, fetchArtifact } from './fetch.js';

const run = promisify(execFile);
const CREDENTIAL = 'artifact-credential-0123456789';

describe('the artifact fetcher (init container)', () => {
  let root: string;
  let archive: Buffer;
  let sha256: string;
  let server: Server;
  let base: string;
  /** What the server answers at /tampered: the archive with one byte changed. */
  let tampered: Buffer;
  let flaky = 0;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'berth-fetch-'));
    const project = join(root, 'project');
    await mkdir(join(project, 'node_modules', 'dep'), { recursive: true });
    await writeFile(join(project, 'langgraph.json'), '{"graphs":{"agent":"./graph.js:graph"}}');
    await writeFile(join(project, 'node_modules', 'dep', 'index.js'), 'export const x = 1;\n');
    await writeFile(join(project, 'run.sh'), '#!/bin/sh\n', { mode: 0o755 });
    await run('tar', ['-czf', join(root, 'a.tar.gz'), '-C', project, '.']);
    archive = await readFile(join(root, 'a.tar.gz'));
    sha256 = createHash('sha256').update(archive).digest('hex');
    tampered = Buffer.from(archive);
    tampered[tampered.length - 20]! ^= 0xff;
    server = createServer((req, res) => {
      if (req.headers.authorization !== `Bearer ${CREDENTIAL}`) {
        res.writeHead(401, { 'content-type': 'application/json' }).end('{"detail":"a valid artifact credential is required"}');
        return;
      }
      if (req.url === '/flaky' && flaky++ < 1) {
        res.writeHead(503).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/gzip' }).end(req.url === '/tampered' ? tampered : archive);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });

  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await rm(root, { recursive: true, force: true });
  });

  it('fetches, verifies and unpacks the project (the built script, as the init container runs it)', async () => {
    const dir = join(root, 'served');
    await mkdir(dir);
    await writeFile(join(dir, 'left-over-from-a-restart'), 'x');
    const { stderr, stdout } = await run(process.execPath, [ARTIFACT_FETCH_SCRIPT], {
      env: {
        BERTH_ARTIFACT_URL: `${base}/artifact`,
        BERTH_ARTIFACT_CREDENTIAL: CREDENTIAL,
        BERTH_ARTIFACT_SHA256: sha256,
        BERTH_ARTIFACT_DIR: dir,
        PATH: process.env.PATH,
      },
    });
    expect(stderr).toBe('');
    expect(stdout).toContain('artifact ready');
    expect((await readdir(dir)).sort()).toEqual(['langgraph.json', 'node_modules', 'run.sh']);
    expect(await readFile(join(dir, 'node_modules', 'dep', 'index.js'), 'utf8')).toBe('export const x = 1;\n');
    expect((await stat(join(dir, 'run.sh'))).mode & 0o111).toBeTruthy();
  });

  it('refuses a tampered archive with a clear error and unpacks nothing', async () => {
    const dir = join(root, 'refused');
    await expect(fetchArtifact({ url: `${base}/tampered`, credential: CREDENTIAL, sha256, dir })).rejects.toThrow(ArtifactChecksumError);
    await expect(fetchArtifact({ url: `${base}/tampered`, credential: CREDENTIAL, sha256, dir })).rejects.toThrow(
      new RegExp(`SHA-256 is [0-9a-f]{64}, but the revision was built as ${sha256}: refusing to unpack it`),
    );
    await expect(readdir(dir)).rejects.toThrow(/ENOENT/);
    // The script exits 1 and says why.
    const failed = await run(process.execPath, [ARTIFACT_FETCH_SCRIPT], {
      env: {
        BERTH_ARTIFACT_URL: `${base}/tampered`,
        BERTH_ARTIFACT_CREDENTIAL: CREDENTIAL,
        BERTH_ARTIFACT_SHA256: sha256,
        BERTH_ARTIFACT_DIR: dir,
        PATH: process.env.PATH,
      },
    }).then(
      () => undefined,
      (error: { code: number; stdout: string }) => error,
    );
    expect(failed?.code).toBe(1);
    expect(failed?.stdout).toContain('refusing to unpack it');
  });

  it('says why the platform refused it (no retry), and retries a 503', async () => {
    const dir = join(root, 'other');
    await expect(fetchArtifact({ url: `${base}/artifact`, credential: 'wrong-credential-0000', sha256, dir, attempts: 3, retryDelayMs: 10 })).rejects.toThrow(
      `${base}/artifact answered 401: {"detail":"a valid artifact credential is required"}`,
    );
    const lines: string[] = [];
    await fetchArtifact({ url: `${base}/flaky`, credential: CREDENTIAL, sha256, dir, retryDelayMs: 10, log: (line) => lines.push(line) });
    expect(lines[0]).toBe(`${base}/flaky answered 503; trying again in 10 ms`);
    expect(await readdir(dir)).toContain('langgraph.json');
  });
});
