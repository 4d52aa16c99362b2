import { afterAll, describe, expect, test } from '@jest/globals';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadProjectConfig, loadProjectEnv, parseDotenv, ProjectConfigError } from './index.js';

const fixtures = fileURLToPath(new URL('../../../services/agent-runtime/test-projects/', import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'berth-project-config-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

let counter = 0;
/** Writes a project (langgraph.json text + files) into a fresh directory; returns the config path. */
function project(json: string | object, files: Record<string, string> = { 'src/graph.ts': 'export const graph = 1;\n' }): string {
  const dir = join(scratch, `p${(counter += 1)}`);
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'langgraph.json'), typeof json === 'string' ? json : JSON.stringify(json));
  return join(dir, 'langgraph.json');
}

function configError(fn: () => unknown): ProjectConfigError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ProjectConfigError);
    return error as ProjectConfigError;
  }
  throw new Error('expected a ProjectConfigError');
}

describe('loadProjectConfig', () => {
  test('reads the echo project: object graph entry, description, env file', () => {
    const config = loadProjectConfig(join(fixtures, 'echo/langgraph.json'));
    expect(config.projectDir).toBe(join(fixtures, 'echo'));
    expect(config.graphs.echo).toEqual({
      graphId: 'echo',
      spec: './src/graph.ts:graph',
      file: './src/graph.ts',
      sourceFile: join(fixtures, 'echo/src/graph.ts'),
      exportName: 'graph',
      description: expect.stringContaining('echo'),
    });
    expect(config.envFile).toBe(join(fixtures, 'echo/.env'));
    expect(config.json.node_version).toBe('20');
    expect(config.warnings).toEqual([]);
  });

  test('a spec without ":" names the default export (as langgraphjs does)', () => {
    const config = loadProjectConfig(join(fixtures, 'builder/langgraph.json'));
    expect(config.graphs.builder).toMatchObject({ exportName: 'default', sourceFile: join(fixtures, 'builder/src/graph.ts') });
  });

  test('accepts the known keys, resolves auth and http.app, warns about unknown keys', () => {
    const path = project(
      {
        graphs: { a: './src/graph.ts:graph' },
        env: { OPENAI_API_KEY: 'x', PORT: 8080 },
        auth: { path: './src/auth.ts:auth', disable_studio_auth: true },
        http: {
          app: './src/app.ts:app',
          cors: {
            allow_origins: ['https://a.example'],
            allow_methods: ['GET'],
            allow_headers: ['x'],
            allow_credentials: true,
            expose_headers: ['y'],
            max_age: 600,
            bogus: 1,
          },
          disable_store: true,
          shiny: true,
        },
        node_version: 22,
        dependencies: ['.'],
        dockerfile_lines: ['RUN true'],
        ui: { agent: './src/ui.tsx' },
        store: { index: { dims: 1536, embed: 'openai:text-embedding-3-small' } },
        python_version: '3.12',
        whatever: true,
      },
      { 'src/graph.ts': '', 'src/auth.ts': '', 'src/app.ts': '', 'src/ui.tsx': '' },
    );
    const config = loadProjectConfig(path);
    expect(config.ui).toEqual({ agent: join(dirname(path), 'src/ui.tsx') });
    expect(config.auth).toMatchObject({ exportName: 'auth', disableStudioAuth: true });
    expect(config.httpApp).toMatchObject({ exportName: 'app' });
    expect(config.http?.cors?.max_age).toBe(600);
    expect(config.json.node_version).toBe('22');
    expect(loadProjectEnv(config)).toEqual({ OPENAI_API_KEY: 'x', PORT: '8080' });
    expect(config.warnings).toEqual(['unknown key "whatever" is ignored', 'unknown key "http.shiny" is ignored', 'unknown key "http.cors.bogus" is ignored']);
  });

  test('checkpointer.ttl takes effect (no warning); the rest of checkpointer is named as having none', () => {
    const ttl = { strategy: 'keep_latest', default_ttl: 60, sweep_interval_minutes: 5, sweep_limit: 100 };
    const config = loadProjectConfig(project({ graphs: { a: './src/graph.ts:g' }, checkpointer: { ttl, path: './src/saver.ts:saver' } }));
    expect(config.json.checkpointer?.ttl).toEqual(ttl);
    expect(config.warnings).toEqual(['"checkpointer.path" has no effect on Berth: threads are checkpointed to Postgres']);
    const typo = loadProjectConfig(project({ graphs: { a: './src/graph.ts:g' }, checkpointer: { ttl: { default_tll: 5 } } }));
    expect(typo.warnings).toEqual(['unknown key "checkpointer.ttl.default_tll" is ignored']);
    const strategy = configError(() => loadProjectConfig(project({ graphs: { a: './src/graph.ts:g' }, checkpointer: { ttl: { strategy: 'archive' } } })));
    expect(strategy.key).toBe('checkpointer.ttl.strategy');
    // Beyond what Postgres can add to a date, or a timer can wait.
    const long = configError(() => loadProjectConfig(project({ graphs: { a: './src/graph.ts:g' }, checkpointer: { ttl: { default_ttl: 1e12 } } })));
    expect(long.key).toBe('checkpointer.ttl.default_ttl');
    const rare = configError(() =>
      loadProjectConfig(project({ graphs: { a: './src/graph.ts:g' }, checkpointer: { ttl: { sweep_interval_minutes: 50_000 } } })),
    );
    expect(rare.key).toBe('checkpointer.ttl.sweep_interval_minutes');
  });

  test('a ui entry whose file is missing', () => {
    const path = project({ graphs: { a: './src/graph.ts:graph' }, ui: { a: './src/missing.tsx' } }, { 'src/graph.ts': '' });
    expect(configError(() => loadProjectConfig(path)).message).toMatch(/: ui\.a: file not found: \.\/src\/missing\.tsx/);
  });

  test('missing file', () => {
    const error = configError(() => loadProjectConfig(join(scratch, 'nope/langgraph.json')));
    expect(error.message).toBe(`${join(scratch, 'nope/langgraph.json')}: config file not found`);
    expect(error.cause).toBeDefined();
    expect(error.name).toBe('ProjectConfigError');
    expect(error.code).toBe('invalid_argument');
  });

  test('invalid JSON and non-object JSON', () => {
    const path = project('{ "graphs": ');
    expect(configError(() => loadProjectConfig(path)).message).toMatch(/langgraph\.json: invalid JSON: /);
    expect(configError(() => loadProjectConfig(project('[]'))).message).toMatch(/must contain a JSON object/);
  });

  test('schema violations name the key', () => {
    expect(configError(() => loadProjectConfig(project({}))).key).toBe('graphs');
    expect(configError(() => loadProjectConfig(project({ graphs: {} }))).message).toMatch(/graphs: must name at least one graph/);
    const cors = configError(() => loadProjectConfig(project({ graphs: { a: './src/graph.ts:g' }, http: { cors: { allow_origins: '*' } } })));
    expect(cors.key).toBe('http.cors.allow_origins');
    const node = configError(() => loadProjectConfig(project({ graphs: { a: './src/graph.ts:g' }, node_version: '18' })));
    expect(node.message).toMatch(/node_version: must be a Node.js version of at least 20/);
    const auth = configError(() => loadProjectConfig(project({ graphs: { a: './src/graph.ts:g' }, auth: {} })));
    expect(auth.key).toBe('auth.path');
  });

  test('graph specs: file not found, empty export, empty path', () => {
    const missing = configError(() => loadProjectConfig(project({ graphs: { agent: './src/agent.ts:graph' } })));
    expect(missing.key).toBe('graphs.agent');
    expect(missing.message).toMatch(/langgraph\.json: graphs\.agent: file not found: \.\/src\/agent\.ts/);
    const empty = configError(() => loadProjectConfig(project({ graphs: { agent: './src/graph.ts:' } })));
    expect(empty.message).toMatch(/graphs\.agent: "\.\/src\/graph\.ts:" has an empty export name/);
    expect(configError(() => loadProjectConfig(project({ graphs: { agent: ':graph' } }))).message).toMatch(/no file path/);
    const dir = configError(() => loadProjectConfig(project({ graphs: { agent: './src:graph' } })));
    expect(dir.message).toMatch(/file not found/);
    const auth = configError(() => loadProjectConfig(project({ graphs: { a: './src/graph.ts:g' }, auth: { path: './auth.ts:auth' } })));
    expect(auth.message).toMatch(/auth\.path: file not found: \.\/auth\.ts/);
  });
});

describe('parseDotenv', () => {
  test('assignments, comments, quotes, export, escapes, multi-line', () => {
    const text = [
      '# a comment',
      '',
      'PLAIN=value',
      'SPACED =  padded value  ',
      'INLINE=abc # trailing comment',
      'export EXPORTED=yes',
      'EMPTY=',
      "SINGLE='literal \\n # not a comment'",
      'DOUBLE="line1\\nline2 \\"quoted\\" # kept"',
      'BACKTICK=`it\'s "fine"`',
      'MULTI="first',
      'second"',
      'not an assignment',
      'DOTTED.KEY-1=ok',
      'PLAIN=overridden',
      'URL=postgres://u:p@h:5432/db?x=1',
    ].join('\r\n');
    expect(parseDotenv(text)).toEqual({
      PLAIN: 'overridden',
      SPACED: 'padded value',
      INLINE: 'abc',
      EXPORTED: 'yes',
      EMPTY: '',
      SINGLE: 'literal \\n # not a comment',
      DOUBLE: 'line1\nline2 "quoted" # kept',
      BACKTICK: `it's "fine"`,
      MULTI: 'first\nsecond',
      'DOTTED.KEY-1': 'ok',
      URL: 'postgres://u:p@h:5432/db?x=1',
    });
  });
});

describe('loadProjectEnv', () => {
  test('reads the env file named by the config, without touching process.env', () => {
    const env = loadProjectEnv(loadProjectConfig(join(fixtures, 'echo/langgraph.json')));
    expect(env).toEqual({ ECHO_PREFIX: 'echo', QUOTED: 'hello world' });
    expect(process.env.ECHO_PREFIX).toBeUndefined();
  });

  test('no env key → {}', () => {
    expect(loadProjectEnv(loadProjectConfig(join(fixtures, 'builder/langgraph.json')))).toEqual({});
  });

  test('missing env file is an error naming `env`, unless missingFileOk', () => {
    const config = loadProjectConfig(project({ graphs: { a: './src/graph.ts:g' }, env: './.env.local' }));
    const error = configError(() => loadProjectEnv(config));
    expect(error.key).toBe('env');
    expect(error.message).toMatch(/langgraph\.json: env: env file not found: \.\/\.env\.local/);
    expect(loadProjectEnv(config, { missingFileOk: true })).toEqual({});
  });
});
