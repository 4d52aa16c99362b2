/**
 * The flags every gateway command shares, through the built `berth` binary in an empty folder (no
 * environment, no `berth login`, no `.berth/`): `--url` (or `--host`) and `--api-key` reach the
 * request, `--json` prints JSON, bad numbers and choices stop the command with a message, and
 * `deploy delete` asks first.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEPLOYMENT_ID, KEY_ID, NEW_DEPLOYMENT_ID, RecordingGateway, TENANT_ID } from './__tests__/recording-gateway.js';

const bin = fileURLToPath(new URL('../dist/bin.js', import.meta.url));
const KEY = 'brt_key_flagsflagsflagsflagsflagsflags12';
let gateway: RecordingGateway;
let home: string;
/** An empty folder (its name is no deployment's) that commands run in. */
let folder: string;
/** A LangGraph project folder for `berth deploy`. */
let project: string;

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

function run(file: string, args: string[], options: { cwd?: string; input?: string } = {}): Promise<Result> {
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: home, XDG_CONFIG_HOME: join(home, 'config'), LOG_LEVEL: 'warn' };
  for (const name of ['BERTH_API_KEY', 'BERTH_HOST_URL', 'BERTH_TENANT_ID', 'BERTH_STATE_DIR', 'DATABASE_URL']) delete env[name];
  return new Promise((resolve) => {
    const child = execFile(file, args, { cwd: options.cwd ?? folder, env, timeout: 30_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
    child.stdin?.end(options.input ?? '');
  });
}

const berth = (args: string[], options?: { cwd?: string; input?: string }) => run(process.execPath, [bin, ...args], options);

/** Runs `berth` on a terminal (util-linux `script` gives it one), typing `input`. */
function berthOnTerminal(args: string[], input: string): Promise<Result> {
  const command = [process.execPath, bin, ...args].map((a) => `'${a}'`).join(' ');
  return run('script', ['-qec', command, '/dev/null'], { input });
}

beforeAll(async () => {
  gateway = await new RecordingGateway().start();
  home = await mkdtemp(join(tmpdir(), 'berth-flags-'));
  folder = join(home, 'some-folder');
  project = join(home, 'fresh');
  await mkdir(folder);
  await mkdir(join(project, 'src'), { recursive: true });
  await writeFile(join(project, 'langgraph.json'), JSON.stringify({ graphs: { echo: './src/graph.ts:graph' } }));
  await writeFile(join(project, 'src', 'graph.ts'), 'export const graph = 1;\n');
});
afterAll(async () => {
  await gateway.close();
  await rm(home, { recursive: true, force: true });
});
beforeEach(() => gateway.reset());

/** Each command, what it must ask the gateway for, and whether it takes --api-key and --json. */
const commands: { args: string[]; requests: string[]; cwd?: () => string; apiKey?: false; json?: false }[] = [
  { args: ['deploy', 'list'], requests: ['GET /v2/deployments?limit=100'] },
  { args: ['deploy', 'revisions', 'my-custom'], requests: [`GET /v2/deployments/${DEPLOYMENT_ID}/revisions?limit=10`] },
  {
    args: ['deploy', 'revisions', DEPLOYMENT_ID, '--limit', '3'],
    requests: [`GET /v2/deployments/${DEPLOYMENT_ID}`, `GET /v2/deployments/${DEPLOYMENT_ID}/revisions?limit=3`],
  },
  {
    args: ['deploy', 'logs', '--name', 'my-custom'],
    requests: ['GET /v2/deployments?name_contains=my-custom&limit=100', `GET /v2/deployments/${DEPLOYMENT_ID}/logs?tail=100`],
  },
  { args: ['deploy', 'delete', 'my-custom', '--yes'], requests: [`DELETE /v2/deployments/${DEPLOYMENT_ID}`] },
  {
    args: ['deploy', '--no-wait'],
    cwd: () => project,
    requests: ['GET /v2/deployments?name_contains=fresh&limit=100', 'POST /v2/deployments', `POST /v2/deployments/${NEW_DEPLOYMENT_ID}/upload`],
  },
  { args: ['keys', 'create', '--name', 'ci'], requests: ['GET /v1/me', `POST /v1/tenants/${TENANT_ID}/api-keys`] },
  { args: ['keys', 'list'], requests: [`GET /v1/tenants/${TENANT_ID}/api-keys`] },
  { args: ['keys', 'revoke', KEY_ID], requests: [`DELETE /v1/tenants/${TENANT_ID}/api-keys/${KEY_ID}`] },
  { args: ['tenants', 'create', 'acme'], requests: ['POST /v1/tenants'] },
  { args: ['tenants', 'list'], requests: ['GET /v1/tenants?limit=100&offset=0'] },
  { args: ['status'], apiKey: false, requests: ['GET /readyz'] },
];

describe('connection flags', () => {
  for (const flag of ['--url', '--host']) {
    it.each(commands.map((c) => [c.args.join(' '), c] as const))(
      `berth %s ${flag} … --json: the flags reach the request, the output is JSON`,
      async (_name, command) => {
        const args = [...command.args, flag, gateway.url, ...(command.apiKey === false ? [] : ['--api-key', KEY]), '--json'];
        const result = await berth(args, { cwd: command.cwd?.() ?? folder });
        expect(result.stderr).toBe('');
        expect(result.code).toBe(0);
        const sent = gateway.requests.map((r) => `${r.method} ${r.url}`);
        expect(sent).toEqual(expect.arrayContaining(command.requests));
        if (command.apiKey !== false) expect(new Set(gateway.requests.map((r) => r.apiKey))).toEqual(new Set([KEY]));
        // One JSON document, or one per line (the events of `deploy`, the entries of `deploy logs`).
        const lines = result.stdout.trim().split('\n');
        expect(lines.length).toBeGreaterThan(0);
        for (const line of lines) expect(() => JSON.parse(line) as unknown).not.toThrow();
      },
    );
  }

  it('berth login --url: the login flow starts at that gateway', async () => {
    const result = await berth(['login', '--url', gateway.url]);
    expect(result.stdout).toContain(`${gateway.url}/login/a1`);
    expect(gateway.requests.map((r) => `${r.method} ${r.url}`)).toEqual(['POST /v2/auth/login', 'GET /v2/auth/wait/a1?timeout=30']);
    // This gateway says the link expired: the command ends with that, not with "cannot reach".
    expect(result.stderr).toContain('the login link expired');
  });

  it('deploy logs --name shows that deployment, not the folder’s, as readable lines', async () => {
    const result = await berth(['deploy', 'logs', '--name', 'my-custom', '--url', gateway.url, '--api-key', KEY]);
    expect(result.stderr).toBe('');
    expect(result.stdout).toMatch(/^\d\d:\d\d:\d\d deploy INFO {2}server listening port=1234$/m);
  });

  it('the hint after deploy --no-wait is a command that works', async () => {
    const submitted = await berth(['deploy', '--no-wait', '--url', gateway.url, '--api-key', KEY], { cwd: project });
    expect(submitted.code).toBe(0);
    const hint = /`(berth deploy logs [^`]+)`/.exec(submitted.stdout)?.[1];
    expect(hint).toBe(`berth deploy logs --name fresh --follow --url ${gateway.url} --api-key <key>`);
    gateway.requests.length = 0;
    // Without --follow (it would not end), with the key in place of <key>.
    const args = hint!
      .split(' ')
      .slice(1)
      .filter((a) => a !== '--follow')
      .map((a) => (a === '<key>' ? KEY : a));
    const logs = await berth(args, { cwd: project });
    expect(logs.stderr).toBe('');
    expect(logs.code).toBe(0);
    expect(gateway.requests.map((r) => r.url)).toContain('/v2/deployments?name_contains=fresh&limit=100');
  });

  it('says where an option given before a deploy subcommand belongs', async () => {
    const result = await berth(['deploy', '--json', 'list', '--url', gateway.url, '--api-key', KEY]);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe('berth: put --json after the subcommand: berth deploy list --json …\n');
    expect(gateway.requests).toEqual([]);
  });

  it('says which URL is not one', async () => {
    const result = await berth(['deploy', 'list', '--url', 'ftp://example.com', '--api-key', KEY]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('berth: --url must be an http(s) URL such as http://127.0.0.1:8080, not "ftp://example.com"');
  });
});

describe('numbers and choices in flags', () => {
  it.each([
    [['dev', '-n', 'abc'], '-n/--workers must be a whole number from 1 to 1000, got abc'],
    [['dev', '--workers', '-1'], '-n/--workers must be a whole number from 1 to 1000, got -1'],
    [['dev', '-p', '70000'], '-p/--port must be a whole number from 0 to 65535, got 70000'],
    [['dev', '--processes', '0'], '--processes must be a whole number from 1 to 64, got 0'],
    [['deploy', '--timeout', '1.5'], '--timeout must be a whole number from 1 to 86400, got 1.5'],
    [['deploy', 'revisions', 'x', '--limit', '0'], '--limit must be a whole number from 1 to 100, got 0'],
    [['deploy', 'logs', '--limit', 'all'], '--limit must be a whole number from 1 to 100000, got all'],
    [['login', '--timeout', 'soon'], '--timeout must be a whole number from 1 to 3600, got soon'],
    [['keys', 'create', '--name', 'x', '--role', 'owner'], '--role must be one of admin, member, got owner'],
    [['deploy', '--deployment-type', 'staging'], '--deployment-type must be one of dev, prod, got staging'],
    [['deploy', 'logs', '--type', 'runtime'], '--type must be one of build, deploy, got runtime'],
  ])('berth %j stops with a clear message', async (args, message) => {
    // In a project folder, where `berth dev` would otherwise serve (with no workers: runs stay pending).
    const result = await berth(args[0] === 'dev' ? args : [...args, '--url', gateway.url], { cwd: project });
    expect(result.stderr).toBe(`berth: ${message}\n`);
    expect(result.code).toBe(1);
    expect(gateway.requests).toEqual([]);
  });
});

describe('naming a deployment: the same four ways for every deploy subcommand', () => {
  const connection = () => ['--url', gateway.url, '--api-key', KEY];
  /** What each subcommand asks of the deployment once it knows which one. */
  const subcommands: [string[], string][] = [
    [['revisions'], `GET /v2/deployments/${DEPLOYMENT_ID}/revisions?limit=10`],
    [['logs'], `GET /v2/deployments/${DEPLOYMENT_ID}/logs?tail=100`],
    [['delete', '--yes'], `DELETE /v2/deployments/${DEPLOYMENT_ID}`],
  ];
  /** How the deployment is named, and the folder the command runs in (undefined: one named after no deployment). */
  const ways: [string, string[], string | undefined][] = [
    ['a name as the argument', ['my-custom'], undefined],
    ['an id as the argument', [DEPLOYMENT_ID], undefined],
    ['--name', ['--name', 'my-custom'], undefined],
    ['--deployment-id', ['--deployment-id', DEPLOYMENT_ID], undefined],
    ['nothing, in the folder named after it', [], 'my-custom'],
  ];

  beforeAll(async () => {
    await mkdir(join(home, 'my-custom'), { recursive: true });
  });

  for (const [sub, request] of subcommands) {
    it.each(ways)(`berth deploy ${sub[0]} with %s`, async (_way, naming, cwd) => {
      const result = await berth(['deploy', sub[0]!, ...naming, ...sub.slice(1), ...connection()], { cwd: cwd ? join(home, cwd) : folder });
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      expect(gateway.requests.map((r) => `${r.method} ${r.url}`)).toContain(request);
    });

    it(`berth deploy ${sub[0]} refuses two names, and says which deployment a folder has none of`, async () => {
      const twice = await berth(['deploy', sub[0]!, 'my-custom', '--name', 'my-custom', ...sub.slice(1), ...connection()]);
      expect(twice.stderr).toBe('berth: name the deployment once: an argument and --name were given\n');
      const here = await berth(['deploy', sub[0]!, ...sub.slice(1), ...connection()]);
      expect(here.stderr).toBe(
        "berth: no deployment named some-folder (this folder's deployment): give a deployment name or id (`berth deploy list` shows your deployments)\n",
      );
      expect(here.code).toBe(1);
      expect(gateway.requests.filter((r) => r.method !== 'GET')).toEqual([]);
    });
  }
});

describe('berth deploy delete', () => {
  const connection = () => ['--url', gateway.url, '--api-key', KEY];

  it('refuses without --yes when stdin is not a terminal', async () => {
    const result = await berth(['deploy', 'delete', 'my-custom', ...connection()], { input: 'y\n' });
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(`berth: not deleting deployment my-custom (${DEPLOYMENT_ID}) without confirmation: stdin is not a terminal, so pass --yes\n`);
    expect(gateway.requests.filter((r) => r.method === 'DELETE')).toEqual([]);
  });

  it('asks on a terminal, and deletes only after yes', async () => {
    const no = await berthOnTerminal(['deploy', 'delete', 'my-custom', ...connection()], 'n\n');
    expect(no.stdout).toContain(`Delete deployment my-custom (${DEPLOYMENT_ID})? [y/N]`);
    expect(no.stdout).toContain('cancelled');
    expect(gateway.requests.filter((r) => r.method === 'DELETE')).toEqual([]);

    const yes = await berthOnTerminal(['deploy', 'delete', DEPLOYMENT_ID, ...connection()], 'y\n');
    expect(yes.stdout).toContain(`Delete deployment my-custom (${DEPLOYMENT_ID})? [y/N]`);
    expect(yes.stdout).toContain(`Deleted deployment my-custom (${DEPLOYMENT_ID}).`);
    expect(gateway.requests.filter((r) => r.method === 'DELETE').map((r) => r.url)).toEqual([`/v2/deployments/${DEPLOYMENT_ID}`]);
  });

  it('says when no deployment has that name or id', async () => {
    const result = await berth(['deploy', 'delete', 'nope', '--yes', ...connection()]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('no deployment named nope or with that id');
  });
});
