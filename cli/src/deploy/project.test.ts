import { afterEach, describe, expect, it } from '@jest/globals';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deploymentName } from './target.js';
import { isReserved, loadProject, parseDotEnv, ProjectConfigError, secretsFromEnv } from './project.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});
async function tempProject(files: Record<string, string>, name = 'proj'): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'berth-project-'));
  dirs.push(root);
  const dir = join(root, name);
  for (const [path, text] of Object.entries(files)) {
    await mkdir(join(dir, path, '..'), { recursive: true });
    await writeFile(join(dir, path), text);
  }
  await mkdir(dir, { recursive: true });
  return dir;
}

describe('deployment name', () => {
  it('checks --name instead of changing it, and falls back to the folder name', () => {
    expect(deploymentName('ok-name', '/x/y')).toBe('ok-name');
    expect(() => deploymentName('Bad_Name', '/x/y')).toThrow(/--name must be lower-case.*e\.g\. bad-name/);
    expect(deploymentName(undefined, '/home/me/My Project')).toBe('my-project');
    expect(() => deploymentName(undefined, '/home/me/___')).toThrow(/pass --name/);
  });
});

describe('parseDotEnv', () => {
  it('reads dotenv syntax: comments, export, quotes, escapes, multi-line values, last one wins', () => {
    const text = [
      '# a comment',
      'PLAIN=value',
      'SPACED = spaced value  ',
      'export EXPORTED=yes',
      'EMPTY=',
      'HASH=abc#def',
      'COMMENTED=abc # note',
      "SINGLE='it''s # not a comment'",
      'DOUBLE="line1\\nline2 \\"quoted\\""',
      'MULTI="first',
      'second"',
      'BACKTICK=`tick`',
      '  INDENTED=1',
      'not an assignment',
      'PLAIN=override',
      'URL=postgres://u:p@h:5432/db?x=1',
      'CRLF=windows\r',
    ].join('\n');
    expect(parseDotEnv(text)).toEqual({
      PLAIN: 'override',
      SPACED: 'spaced value',
      EXPORTED: 'yes',
      EMPTY: '',
      HASH: 'abc#def',
      COMMENTED: 'abc',
      SINGLE: 'it',
      DOUBLE: 'line1\nline2 "quoted"',
      MULTI: 'first\nsecond',
      BACKTICK: 'tick',
      INDENTED: '1',
      URL: 'postgres://u:p@h:5432/db?x=1',
      CRLF: 'windows',
    });
  });

  it('reads a single-quoted value literally', () => {
    expect(parseDotEnv("A='x\\ny'\nB=2")).toEqual({ A: 'x\\ny', B: '2' });
  });
});

describe('secretsFromEnv', () => {
  it('sends the project’s variables and skips the platform’s own settings and credentials', () => {
    const { secrets, skipped } = secretsFromEnv({
      OPENAI_API_KEY: 'sk-1',
      MY_SETTING: 'x',
      BERTH_API_KEY: 'brt_key_x',
      BERTH_HOST_URL: 'http://h',
      DATABASE_URL: 'postgres://',
      REDIS_URL: 'redis://',
      PORT: '1',
      HOST: 'h',
      LANGSMITH_API_KEY: 'ls',
      LANGCHAIN_API_KEY: 'lc',
      'bad-name': '1',
    });
    expect(secrets).toEqual([
      { name: 'MY_SETTING', value: 'x' },
      { name: 'OPENAI_API_KEY', value: 'sk-1' },
    ]);
    expect(skipped).toEqual([
      'BERTH_API_KEY',
      'BERTH_HOST_URL',
      'DATABASE_URL',
      'HOST',
      'LANGCHAIN_API_KEY',
      'LANGSMITH_API_KEY',
      'PORT',
      'REDIS_URL',
      'bad-name',
    ]);
    expect(isReserved('BERTH_ANYTHING')).toBe(true);
    expect(isReserved('LANGSMITH_PROJECT')).toBe(false);
  });
});

describe('loadProject', () => {
  it('finds langgraph.json and reads .env', async () => {
    const dir = await tempProject({ 'langgraph.json': '{"graphs":{}}', '.env': 'A=1\nBERTH_API_KEY=k\n' });
    expect(await loadProject(dir)).toEqual({
      dir,
      configFile: join(dir, 'langgraph.json'),
      configPath: 'langgraph.json',
      env: { A: '1', BERTH_API_KEY: 'k' },
      envSource: '.env',
    });
  });

  it('uses the env file or values langgraph.json names, and a config in a subfolder', async () => {
    const dir = await tempProject({
      'agent/langgraph.json': '{"graphs":{},"env":"../config/prod.env"}',
      'config/prod.env': 'FROM_FILE=1',
      '.env': 'IGNORED=1',
    });
    expect(await loadProject(dir, 'agent/langgraph.json')).toMatchObject({
      configPath: 'agent/langgraph.json',
      env: { FROM_FILE: '1' },
      envSource: 'config/prod.env',
    });
    const inline = await tempProject({ 'langgraph.json': '{"graphs":{},"env":{"N":3,"S":"x"}}' });
    expect(await loadProject(inline)).toMatchObject({ env: { N: '3', S: 'x' }, envSource: 'the env of langgraph.json' });
    const none = await tempProject({ 'langgraph.json': '{}' });
    expect(await loadProject(none)).toMatchObject({ env: {}, envSource: undefined });
  });

  it('says clearly what is wrong with the project', async () => {
    const empty = await tempProject({});
    await expect(loadProject(empty)).rejects.toThrow(ProjectConfigError);
    await expect(loadProject(empty)).rejects.toThrow(/no langgraph\.json at .*run `berth deploy` in the folder of a LangGraph project/);
    const broken = await tempProject({ 'langgraph.json': '{"graphs":' });
    await expect(loadProject(broken)).rejects.toThrow(/is not valid JSON/);
    const missingEnv = await tempProject({ 'langgraph.json': '{"env":".env.prod"}' });
    await expect(loadProject(missingEnv)).rejects.toThrow(/names the env file \.env\.prod, which does not exist/);
    const outside = await tempProject({ 'langgraph.json': '{}' });
    await expect(loadProject(join(outside, 'sub'), '../langgraph.json')).rejects.toThrow(/outside/);
  });
});
