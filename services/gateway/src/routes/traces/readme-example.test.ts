/**
 * The README's traces example (`examples/traces/conversation.mjs`) run as a user runs it — a
 * process of its own with only LANGSMITH_ENDPOINT and LANGSMITH_API_KEY — against a real gateway,
 * export-worker and Postgres: it prints the conversation's runs with their tokens and feedback and
 * the thread's stats, and the SDK prints no warning.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { startTraceStack, type TraceStack } from '../../__tests__/trace-stack.js';

const example = fileURLToPath(new URL('../../../../../examples/traces/conversation.mjs', import.meta.url));
let stack: TraceStack;

beforeAll(async () => {
  stack = await startTraceStack('gw_readme_example');
}, 60_000);
afterAll(async () => {
  await stack?.close();
});

describe('the README’s traces example', () => {
  it('traces a two-turn conversation, then reads its runs, feedback and thread through the SDK’s current API', async () => {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [example], {
      env: { PATH: process.env.PATH, LANGSMITH_ENDPOINT: stack.gateway.url, LANGSMITH_API_KEY: stack.keyA },
    });
    const lines = stdout.trim().split('\n');
    const thread = /^thread (conversation-[0-9a-f]{8}): /.exec(lines.at(-1)!)?.[1];
    expect(lines.at(-1)).toBe(`thread ${thread}: 2 turns, 34 tokens`);
    // Two turns, each a chain whose model call used 17 tokens; the first turn has the user's thumbs-up.
    expect(lines.slice(0, -1).sort()).toEqual(
      [
        'run chat (CHAIN) SUCCESS, 17 tokens, feedback {"thumbs_up":{"n":1,"avg":1,"stdev":0,"values":{}}}',
        'run chat (CHAIN) SUCCESS, 17 tokens, feedback {}',
        'run model (LLM) SUCCESS, 17 tokens, feedback {}',
        'run model (LLM) SUCCESS, 17 tokens, feedback {}',
      ].sort(),
    );
    expect(stderr).toBe('');
  }, 60_000);
});
