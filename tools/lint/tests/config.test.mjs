// The project's ESLint configuration (eslint.config.mjs): the file-length limit, and which files the
// process.env and status-write rules apply to.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import { ESLint } from 'eslint';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const eslint = new ESLint({ cwd: root });

/** `count` lines of `line`, then `blank` empty lines. */
const text = (count, line = 'use(1);', blank = 0) => `${Array(count).fill(line).join('\n')}\n${'\n'.repeat(blank)}`;
const ruleIds = async (code, file = 'scripts/long-file.mjs') => (await eslint.lintText(code, { filePath: join(root, file) }))[0].messages.map((m) => m.ruleId);
const rulesOf = async (file) => (await eslint.calculateConfigForFile(join(root, file))).rules;

describe('file length', () => {
  it('refuses a file of 601 lines of code and accepts one of 600', async () => {
    expect(await ruleIds(text(601))).toEqual(['max-lines']);
    expect(await ruleIds(text(600))).toEqual([]);
  });

  it('does not count blank lines, but counts comments', async () => {
    expect(await ruleIds(text(600, 'use(1);', 300))).toEqual([]);
    expect(await ruleIds(`// why\n${text(600)}`)).toEqual(['max-lines']);
  });

  it('holds for TypeScript sources and tests alike', async () => {
    for (const file of ['services/gateway/src/routes/x.ts', 'services/gateway/src/x.test.ts', 'libs/testing/src/x.ts', 'charts/berth/tests/x.test.ts']) {
      expect((await rulesOf(file))['max-lines']).toEqual([2, { max: 600, skipBlankLines: true, skipComments: false }]);
    }
  });
});

describe('process.env', () => {
  const envRuleOf = async (files) => Promise.all(files.map(async (file) => [file, (await rulesOf(file))['berth/no-process-env']]));

  it('is refused in service, library and CLI code', async () => {
    const files = [
      'services/gateway/src/server.ts',
      'services/control-plane/src/deployers/local/local-deployer.ts',
      'libs/db/src/index.ts',
      // A library's env.ts is not a reader of settings (this one loads a project's env file).
      'libs/langgraph-project/src/env.ts',
      'cli/src/commands/up.ts',
      'infra/local/src/podman-service.ts',
    ];
    expect(await envRuleOf(files)).toEqual(files.map((file) => [file, [2]]));
  });

  it("is allowed in the services', the CLI's and the local stack's src/env.ts, tests and test support", async () => {
    const files = [
      'services/gateway/src/env.ts',
      'cli/src/env.ts',
      'infra/local/src/env.ts',
      'services/gateway/src/x.test.ts',
      'services/gateway/src/__tests__/fixture.ts',
      'libs/testing/src/global-setup.ts',
      'libs/queue/src/contract/child-worker.ts',
      'charts/berth/tests/x.ts',
    ];
    expect(await envRuleOf(files)).toEqual(files.map((file) => [file, undefined]));
  });

  it('is not checked in scripts (they are entry points run by people and CI)', async () => {
    expect(await ruleIds('console.log(process.env.HOME);', 'scripts/x.mjs')).toEqual([]);
  });
});

describe('status writes', () => {
  it('names one move function per lifecycle declared in the services', async () => {
    const [, { moves }] = (await rulesOf('services/sandbox-manager/src/pools/pools.ts'))['berth/status-writes-in-move'];
    const sources = readdirSync(join(root, 'services'), { recursive: true })
      .filter((file) => /^[^/]+\/src\/(?!.*node_modules).*(?<!\.test)\.ts$/.test(file))
      .map((file) => readFileSync(join(root, 'services', file), 'utf8'));
    const lifecycles = sources.flatMap((source) => source.match(/\bdefineLifecycle\(/g) ?? []);
    expect(lifecycles.length).toBeGreaterThan(0);
    expect(Object.keys(moves)).toHaveLength(lifecycles.length);
  });
});
