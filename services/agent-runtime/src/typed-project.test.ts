/**
 * A project whose graphs declare state and context with `Annotation.Root` (test-projects/typed):
 * the schemas clients see come from the TypeScript types (value types, string-literal unions as
 * enums), and LANGGRAPH_CONFIG in the project env (inline object or env file) gives each named
 * graph's system assistant its config and context, also after a restart with a changed value.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Client } from '@langchain/langgraph-sdk';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { spawnAgentServer } from './__tests__/fixtures.js';

const project = (file: string) => fileURLToPath(new URL(`../test-projects/typed/${file}`, import.meta.url));

let db: TestDatabase;
const children: ChildProcess[] = [];

async function serve(configFile: string): Promise<{ client: Client; child: ChildProcess }> {
  const { child, url } = await spawnAgentServer(db.url, { config: { configPath: project(configFile) } });
  children.push(child);
  return { client: new Client({ apiUrl: url }), child };
}

async function stop(child: ChildProcess): Promise<void> {
  const exited = new Promise((done) => child.once('exit', done));
  child.kill('SIGTERM');
  await exited;
}

beforeAll(async () => {
  db = await createTestDatabase('agenttyped');
}, 60_000);
afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) await stop(child);
  await db?.drop();
});

describe('schemas of Annotation.Root graphs', () => {
  it('come from the TypeScript types: value types, required keys, enums from literal unions', async () => {
    const { client, child } = await serve('langgraph.json');
    // Reading the types takes seconds, off the main thread: a request sent after the schemas' is
    // answered while they are still being read (on the main thread it would wait for them).
    let read = false;
    const reading = client.assistants.getSchemas('typed').finally(() => (read = true));
    await client.assistants.search({ graphId: 'typed' });
    expect(read).toBe(false);
    const schemas = await reading;
    const context = {
      type: 'object',
      properties: { model: { type: 'string', enum: ['anthropic', 'openai', 'unknown'] }, temperature: { type: 'number' } },
      $schema: 'http://json-schema.org/draft-07/schema#',
    };
    expect(schemas.context_schema).toMatchObject(context);
    expect(schemas.config_schema).toMatchObject(context);
    const fields = {
      question: { type: 'string' },
      answer: { type: ['null', 'string'] },
      turns: { type: 'number' },
      tags: { type: 'array', items: { type: 'string' } },
      meta: { type: 'object', properties: { source: { type: 'string' }, score: { type: 'number' } }, required: ['source'] },
    };
    expect(schemas.state_schema).toMatchObject({ type: 'object', properties: fields, required: Object.keys(fields) });
    // Input is an update: every key optional, a reduced channel takes its plain value.
    expect(schemas.input_schema).toMatchObject({ type: 'object', properties: fields });
    expect(schemas.input_schema).not.toHaveProperty('required');
    // A library class is a named definition; an abstract one lists the program's classes that
    // extend it as used (same type arguments) as `oneOf`.
    const message = 'BaseMessage<MessageStructure<MessageToolSet>,MessageType>';
    expect((await client.assistants.getSchemas('chat')).state_schema).toMatchObject({
      type: 'object',
      properties: { messages: { type: 'array', items: { $ref: `#/definitions/${message}` } } },
      definitions: {
        [message]: { description: expect.stringContaining('Base class for all types of messages'), oneOf: [{ $ref: '#/definitions/RemoveMessage' }] },
        RemoveMessage: { type: 'object' },
      },
    });
    // An unknown context key is still refused.
    await expect(client.assistants.create({ graphId: 'typed', context: { modle: 'x' } })).rejects.toThrow(/modle/);
    await stop(child);
  }, 120_000);
});

describe('subgraph schemas of Annotation.Root graphs', () => {
  it("come from the subgraphs' TypeScript types, nested ones too; a subgraph without a module-level name keeps its channel names", async () => {
    const { client, child } = await serve('langgraph.json');
    const subgraphs = await client.assistants.getSubgraphs('nested', { recurse: true });
    expect(Object.keys(subgraphs)).toEqual(['edit', 'edit|check']);
    const notes = { type: 'array', items: { type: 'string' } };
    const edit = { type: 'object', properties: { notes, stage: { type: 'string', enum: ['draft', 'review'] } }, required: ['notes', 'stage'] };
    const check = { type: 'object', properties: { notes, verdict: { type: 'string', enum: ['approved', 'rejected'] } }, required: ['notes', 'verdict'] };
    expect(subgraphs).toMatchObject({
      edit: { state: edit, state_schema: edit, output_schema: edit, input_schema: { properties: edit.properties } },
      'edit|check': { state: check, state_schema: check },
    });
    // One namespace, a nested one too.
    const inner = await client.assistants.getSubgraphs('nested', { namespace: 'edit|check', recurse: true });
    expect(Object.keys(inner)).toEqual(['edit|check']);
    expect(inner['edit|check']?.state_schema).toMatchObject(check);
    // The graph's own schemas still come from its types.
    expect((await client.assistants.getSchemas('nested')).state_schema).toMatchObject({ properties: { notes } });

    // Built inside a factory: no types to read, the runtime's channel names remain.
    expect(await client.assistants.getSubgraphs('local')).toEqual({
      check: expect.objectContaining({ state: { type: 'object', properties: { notes: {}, verdict: {} } } }),
    });
    await stop(child);
  }, 120_000);
});

describe('LANGGRAPH_CONFIG in the project env', () => {
  it("gives the named graph's system assistant its config and context; others keep none", async () => {
    const { client, child } = await serve('langgraph.json');
    const [system] = await client.assistants.search({ graphId: 'typed', metadata: { created_by: 'system' } });
    expect(system).toMatchObject({ config: { configurable: { user: 'ada' } }, context: { model: 'anthropic' } });
    const [plain] = await client.assistants.search({ graphId: 'plain', metadata: { created_by: 'system' } });
    expect(plain).toMatchObject({ config: {}, context: {} });
    // A run on the graph id uses the system assistant's context.
    const values = await client.runs.wait(null, 'typed', { input: { question: 'hi' } });
    expect(values).toMatchObject({ answer: 'anthropic: hi' });
    await stop(child);
  }, 120_000);

  it('does not undo edits made to the system assistant when restarted with the same value', async () => {
    const first = await serve('langgraph.json');
    const [system] = await first.client.assistants.search({ graphId: 'typed', metadata: { created_by: 'system' } });
    await first.client.assistants.update(system!.assistant_id, { context: { model: 'unknown' } });
    await stop(first.child);
    const { client, child } = await serve('langgraph.json');
    expect(await client.assistants.get(system!.assistant_id)).toMatchObject({ context: { model: 'unknown' }, config: { configurable: { user: 'ada' } } });
    const values = await client.runs.wait(null, 'typed', { input: { question: 'hi' } });
    expect(values).toMatchObject({ answer: 'unknown: hi' });
    await stop(child);
  }, 120_000);

  it('from an env file, applied on restart (a changed value) as a new version of the system assistant', async () => {
    const { client, child } = await serve('langgraph.envfile.json');
    const [system] = await client.assistants.search({ graphId: 'typed', metadata: { created_by: 'system' } });
    expect(system).toMatchObject({ config: { tags: ['from-env-file'] }, context: { model: 'openai', temperature: 0.5 } });
    expect(system!.config).not.toHaveProperty('configurable.user');
    expect(system!.version).toBeGreaterThan(1);
    const values = await client.runs.wait(null, 'typed', { input: { question: 'hi' } });
    expect(values).toMatchObject({ answer: 'openai: hi' });
    await stop(child);
  }, 120_000);
});
