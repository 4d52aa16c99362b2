/**
 * `ProjectBuilder` with the real npm (the registry is reachable; its cache is usually warm):
 * a good project builds, a broken one fails with the reason and leaves nothing behind.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, readdir, realpath, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { until } from '@berth/testing';
import { rawTar } from './__tests__/tarballs.js';
import { BuildCancelledError, BuildFailedError, UnsafeTarballError } from './errors.js';
import { ProjectBuilder, type BuildInput } from './project-builder.js';

const example = fileURLToPath(new URL('../../../../examples/echo-agent/', import.meta.url));
// Installers need a PATH and a HOME (npm's cache); nothing else of this process.
const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? tmpdir() };

let work: string;
let artifacts: string;
let builder: ProjectBuilder;
let revision = 0;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'berth-build-test-'));
  artifacts = join(work, 'artifacts');
  builder = new ProjectBuilder({ artifactsDir: artifacts, env });
});
afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

interface Logged {
  line: string;
  level: string;
}

async function build(files: Record<string, string>, extra: Partial<BuildInput> = {}, signal?: AbortSignal) {
  const lines: Logged[] = [];
  revision += 1;
  const input: BuildInput = {
    tarball: rawTar(Object.entries(files).map(([path, body]) => ({ path, body }))),
    deploymentId: 'dep-1',
    revisionId: `rev-${revision}`,
    ...extra,
  };
  const result = await builder
    .build(input, (line, level = 'info') => lines.push({ line, level }), signal)
    .then(
      (artifact) => ({ artifact, error: undefined }),
      (error: unknown) => ({ artifact: undefined, error: error as BuildFailedError }),
    );
  return { ...result, lines, dir: join(artifacts, input.deploymentId, input.revisionId) };
}

/** Alive and not a zombie (an orphan's zombie stays in the table where PID 1 does not reap). */
async function isRunning(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  return stat === undefined ? true : stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
}

async function exampleFiles(): Promise<Record<string, string>> {
  const names = ['package.json', 'package-lock.json', 'langgraph.json', 'src/graph.ts', 'README.md'];
  return Object.fromEntries(await Promise.all(names.map(async (n) => [n, await readFile(join(example, n), 'utf8')] as const)));
}

/** A project without dependencies: `npm install` has nothing to fetch. */
function plainProject(graph: string, langgraph = '{"graphs":{"agent":"./src/graph.ts:graph"}}'): Record<string, string> {
  return { 'package.json': '{"name":"p","type":"module"}', 'langgraph.json': langgraph, 'src/graph.ts': graph };
}

/** A failed build: the error says `message`, the log ends with it, and no artifact is left. */
async function expectFailure(outcome: Awaited<ReturnType<typeof build>>, message: RegExp): Promise<void> {
  expect(outcome.error).toBeInstanceOf(BuildFailedError);
  expect(outcome.error!.message).toMatch(message);
  const errors = outcome.lines
    .filter((l) => l.level === 'error')
    .map((l) => l.line)
    .join('\n');
  expect(errors).toMatch(message);
  expect(outcome.lines.at(-1)!.line).toMatch(/^Build failed after/);
  expect(existsSync(outcome.dir)).toBe(false);
}

describe('ProjectBuilder', () => {
  it('builds the example project with its own copy of LangGraph, then reuses its dependencies', async () => {
    const first = await build(await exampleFiles());
    expect(first.error).toBeUndefined();
    expect(first.artifact).toEqual({
      path: first.dir,
      configPath: 'langgraph.json',
      graphs: ['echo'],
      packageManager: 'npm',
      warnings: [],
    });
    const log = first.lines.map((l) => l.line).join('\n');
    expect(log).toMatch(/Installing dependencies: npm ci \(from package-lock.json\)/);
    expect(log).toMatch(/added \d+ packages/);
    expect(log).toMatch(/Graph "echo" loads \(compiled graph\)/);
    // The agent server's loader (Berth's LangGraph) accepted a graph built with the project's own copy.
    const own = await realpath(join(first.dir, 'node_modules/@langchain/langgraph'));
    expect(own.startsWith(await realpath(first.dir))).toBe(true);

    const second = await build(await exampleFiles());
    expect(second.artifact?.graphs).toEqual(['echo']);
    const secondLog = second.lines.map((l) => l.line).join('\n');
    expect(secondLog).toMatch(/Reusing the dependencies of an earlier build with the same package-lock.json/);
    // What makes the second build fast is what it skipped: no installer ran, and its dependencies
    // are the first build's files (hard links through the cache: the same inode), not a copy.
    expect(secondLog).not.toMatch(/Installing dependencies|added \d+ packages/);
    const langgraph = 'node_modules/@langchain/langgraph/package.json';
    expect((await stat(join(second.dir, langgraph))).ino).toBe((await stat(join(first.dir, langgraph))).ino);
    // Both revisions stay intact and separate.
    expect((await readdir(join(artifacts, 'dep-1'))).sort()).toEqual([`rev-${revision - 1}`, `rev-${revision}`]);
  }, 180_000);

  it('fails on a syntax error, naming the graph and the file', async () => {
    const outcome = await build(plainProject('export const graph = ;\n'));
    await expectFailure(outcome, /graph "agent": cannot import \.\/src\/graph\.ts/);
    expect(outcome.error!.message).toMatch(/src\/graph\.ts:1/);
    // The artifact folder's location is not part of what the user reads.
    expect(outcome.error!.message).not.toContain(artifacts);
  }, 60_000);

  it('fails on a missing export, listing the exports there are', async () => {
    await expectFailure(
      await build(plainProject('export const other = 1;\n')),
      /graph "agent": \.\/src\/graph\.ts:graph: module has no export "graph" \(exports: other\)/,
    );
  }, 60_000);

  it('fails when a graph file is missing or langgraph.json is invalid', async () => {
    await expectFailure(
      await build(plainProject('', '{"graphs":{"agent":"./src/missing.ts:graph"}}')),
      /langgraph\.json: graphs\.agent: file not found: \.\/src\/missing\.ts/,
    );
    await expectFailure(await build(plainProject('', '{"graphs": {}}')), /langgraph\.json: graphs: must name at least one graph/);
    await expectFailure(await build(plainProject('', '{"graphs": ')), /^langgraph\.json is not valid JSON/);
  }, 60_000);

  it('fails without langgraph.json, also at a given path', async () => {
    await expectFailure(await build({ 'package.json': '{}', 'src/graph.ts': '' }), /^langgraph\.json not found in the uploaded project/);
    await expectFailure(await build(plainProject('export const graph = 1;'), { configPath: 'agents/langgraph.json' }), /^agents\/langgraph\.json not found/);
    await expectFailure(await build(plainProject(''), { configPath: '../langgraph.json' }), /must be relative to the project/);
  }, 60_000);

  it('survives project code that exits the process while loading', async () => {
    await expectFailure(
      await build(plainProject('console.error("giving up");\nprocess.exit(3);\nexport const graph = 1;\n')),
      /the project's code ended the validation process while loading \(it exited with code 3\):\ngiving up/,
    );
  }, 60_000);

  it('gives project code the deployment secrets while it loads', async () => {
    // Duck-typed like a compiled graph, so no LangGraph install is needed.
    const graph =
      'if (!process.env.OPENAI_API_KEY) throw new Error("OPENAI_API_KEY is not set");\n' +
      'const noop = () => undefined;\n' +
      'export const graph = { invoke: noop, streamEvents: noop, getGraphAsync: noop };\n';
    const withSecret = await build(plainProject(graph), { env: { OPENAI_API_KEY: 'sk-test' } });
    expect(withSecret.error).toBeUndefined();
    expect(withSecret.artifact).toMatchObject({ graphs: ['agent'], packageManager: 'npm' });
    await expectFailure(await build(plainProject(graph)), /graph "agent": cannot import \.\/src\/graph\.ts: OPENAI_API_KEY is not set/);
  }, 60_000);

  it('fails a project whose graph module never finishes loading', async () => {
    const impatient = new ProjectBuilder({ artifactsDir: artifacts, env, validateTimeoutMs: 1_500 });
    const lines: string[] = [];
    const files = plainProject('setInterval(() => {}, 1000);\nawait new Promise(() => {});\nexport const graph = 1;\n');
    const error = await impatient
      .build({ tarball: rawTar(Object.entries(files).map(([path, body]) => ({ path, body }))), deploymentId: 'dep-3', revisionId: 'rev-1' }, (line) =>
        lines.push(line),
      )
      .catch((e: unknown) => e as Error);
    expect(error).toBeInstanceOf(BuildFailedError);
    expect((error as Error).message).toMatch(/loading the project's graphs did not finish within 2 s/);
    expect(existsSync(join(artifacts, 'dep-3', 'rev-1'))).toBe(false);
  }, 60_000);

  it('rejects a tarball that climbs out of the artifact folder', async () => {
    const outcome = await build({ 'langgraph.json': '{}', '../../../escaped.txt': 'x' });
    expect(outcome.error).toBeInstanceOf(UnsafeTarballError);
    await expectFailure(outcome, /entry "\.\.\/\.\.\/\.\.\/escaped\.txt" contains "\.\."/);
    expect(existsSync(join(work, 'escaped.txt'))).toBe(false);
  });

  it("names the cause when the lockfile is out of date with package.json, not npm's usage text", async () => {
    const files = await exampleFiles();
    const manifest = JSON.parse(files['package.json']!) as { dependencies: Record<string, string> };
    manifest.dependencies['date-fns'] = '^4.1.0';
    files['package.json'] = JSON.stringify(manifest);
    const outcome = await build(files);
    await expectFailure(outcome, /npm ci failed with exit code 1: .*in sync.* — Missing: date-fns@[\d.]+ from lock file/);
    expect(outcome.error!.message).not.toMatch(/Usage|--install-strategy|Clean install|\n/);
    // The last lines a client shows (`berth deploy` prints 30) hold the cause too.
    expect(
      outcome.lines
        .slice(-30)
        .map((l) => l.line)
        .join('\n'),
    ).toMatch(/Missing: date-fns@/);
  }, 120_000);

  it('says which package manager is missing', async () => {
    const bare = new ProjectBuilder({ artifactsDir: artifacts, env: { PATH: join(work, 'empty-bin') } });
    const lines: string[] = [];
    const error = await bare
      .build(
        {
          tarball: rawTar(Object.entries({ ...plainProject(''), 'yarn.lock': '# yarn lockfile v1\n' }).map(([path, body]) => ({ path, body }))),
          deploymentId: 'dep-2',
          revisionId: 'rev-1',
        },
        (line) => lines.push(line),
      )
      .catch((e: unknown) => e as Error);
    expect(error).toBeInstanceOf(BuildFailedError);
    expect((error as Error).message).toBe(
      'the project has yarn.lock, so it is installed with yarn, but yarn is not installed on the control plane and corepack ' +
        'is not available to provide it: install yarn there (or commit a package-lock.json instead)',
    );
    expect(existsSync(join(artifacts, 'dep-2', 'rev-1'))).toBe(false);
  });

  it('stops the installer and its children when the build is aborted', async () => {
    const pidFile = join(work, 'installer.pid');
    const sleeper = `node -e "require('fs').writeFileSync('${pidFile}', String(process.pid)); setInterval(() => {}, 1000)"`;
    const files = plainProject('export const graph = 1;');
    files['package.json'] = JSON.stringify({ name: 'p', type: 'module', scripts: { preinstall: sleeper } });
    const controller = new AbortController();
    const waiting = build(files, {}, controller.signal);
    const pid = Number(
      await until('the preinstall script to start', async () => (existsSync(pidFile) && (await readFile(pidFile, 'utf8'))) || undefined, 30_000),
    );
    controller.abort();
    // The preinstall script never ends by itself: the build ends only because the abort stopped it.
    const outcome = await waiting;
    expect(outcome.error).toBeInstanceOf(BuildCancelledError);
    expect(outcome.error!.message).toMatch(/npm install was stopped: the build was cancelled/);
    expect(await isRunning(pid)).toBe(false); // the preinstall script is gone too
    expect(existsSync(outcome.dir)).toBe(false);
  }, 60_000);
});
