/**
 * Roll-ups through the official `langsmith` client: a trace's root run carries the tokens and
 * costs of its llm runs and the earliest first token, however late and in whatever order they
 * arrive; an llm run that sends tokens without costs is priced from the model price table, one
 * that sends costs keeps them. Every read path shows it: `readRun`, `listRuns` filters,
 * `client.runs.*`, `client.traces.query()`, `client.threads.query()` and the console's project stats.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { Client } from 'langsmith';
import { boundCredentialServer, startTraceStack, type TraceStack } from '../../__tests__/trace-stack.js';

type Json = Record<string, any>;

let stack: TraceStack;
let client: Client;
const T0 = Date.parse('2026-05-04T10:00:00Z');

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

const stamp = (ms: number) =>
  `${new Date(ms)
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.(\d{3})Z$/, '$1000Z')}`;

interface Node {
  id: string;
  name: string;
  run_type: string;
  inputs: Json;
  trace_id: string;
  dotted_order: string;
  start_time: number;
}

/** A run of `project` under `parent` (a root when none), started `offsetMs` after T0. */
function node(project: string, name: string, runType: string, offsetMs: number, parent?: Node, fields: Json = {}): Node & Json {
  const id = randomUUID();
  const start = T0 + offsetMs;
  return {
    id,
    name,
    run_type: runType,
    project_name: project,
    start_time: start,
    trace_id: parent?.trace_id ?? id,
    dotted_order: parent ? `${parent.dotted_order}.${stamp(start)}${id}` : `${stamp(start)}${id}`,
    ...(parent ? { parent_run_id: parent.id } : {}),
    inputs: { q: name },
    ...fields,
  };
}

/** The fields a patch of `run` carries (the client sends trace_id and dotted_order with them). */
const patchOf = (run: Node, fields: Json) => ({ trace_id: run.trace_id, dotted_order: run.dotted_order, ...fields });

const usage = (input: number, output: number, costs?: { input_cost: number; output_cost: number }) => ({
  outputs: { content: 'ok', usage_metadata: { input_tokens: input, output_tokens: output, total_tokens: input + output, ...costs } },
});
const firstToken = (ms: number) => ({
  events: [
    { name: 'start', time: new Date(ms - 5).toISOString() },
    { name: 'new_token', time: new Date(ms).toISOString() },
  ],
});
const model = (name: string) => ({ extra: { metadata: { ls_provider: 'openai', ls_model_name: name } } });

const usageOf = (run: Json) => ({
  prompt_tokens: run.prompt_tokens,
  completion_tokens: run.completion_tokens,
  total_tokens: run.total_tokens,
  prompt_cost: run.prompt_cost,
  completion_cost: run.completion_cost,
  total_cost: run.total_cost,
});

beforeAll(async () => {
  stack = await startTraceStack('gw_rollups');
  client = new Client({ apiUrl: stack.gateway.url, apiKey: stack.keyA, autoBatchTracing: false });
}, 60_000);
afterAll(async () => {
  await stack?.close();
});

describe('a trace whose llm runs arrive after its root ended, out of order', () => {
  const project = `rollups-late-${randomUUID()}`;
  const root = node(project, 'agent', 'chain', 0, undefined, { extra: { metadata: { thread_id: 'th-late' } } });
  // A chain step with an llm run under it, an llm run straight under the root, and a tool that reports tokens.
  const step = node(project, 'step', 'chain', 10, root);
  const priced = node(project, 'gpt-4o-mini', 'llm', 20, step, model('gpt-4o-mini'));
  const paid = node(project, 'own-costs', 'llm', 30, root, model('gpt-4o-mini'));
  const tool = node(project, 'tool', 'tool', 40, root);

  beforeAll(async () => {
    await client.createRun({ ...root, end_time: T0 + 1000, outputs: { answer: 'done' } });
    expect(usageOf(await client.readRun(root.id))).toMatchObject({ total_tokens: null, total_cost: null });
    // The later run first; the earlier one's parent after it.
    await client.createRun({ ...paid, end_time: T0 + 900, ...usage(100, 20, { input_cost: 0.001, output_cost: 0.002 }), ...firstToken(T0 + 400) });
    await client.createRun({ ...priced, end_time: T0 + 800, ...usage(1000, 2000), ...firstToken(T0 + 300) });
    await client.createRun({ ...tool, end_time: T0 + 950, ...usage(5, 5) });
    await client.createRun({ ...step, end_time: T0 + 850 });
  });

  it("the root carries the sums of the trace's llm runs and the earliest first token; the tool's tokens are not counted", async () => {
    const stored = await client.readRun(root.id);
    expect(usageOf(stored)).toEqual({
      prompt_tokens: 1100,
      completion_tokens: 2020,
      total_tokens: 3120,
      prompt_cost: 0.00115,
      completion_cost: 0.0032,
      total_cost: 0.00435,
    });
    expect(stored.first_token_time).toBe(new Date(T0 + 300).toISOString());
  });

  it('an llm run sending tokens without costs is priced from the table; one sending costs keeps them', async () => {
    // gpt-4o-mini: $0.15 and $0.60 per million prompt and completion tokens.
    expect(usageOf(await client.readRun(priced.id))).toEqual({
      prompt_tokens: 1000,
      completion_tokens: 2000,
      total_tokens: 3000,
      prompt_cost: 0.00015,
      completion_cost: 0.0012,
      total_cost: 0.00135,
    });
    expect(usageOf(await client.readRun(paid.id))).toMatchObject({ prompt_cost: 0.001, completion_cost: 0.002, total_cost: 0.003 });
    expect(usageOf(await client.readRun(tool.id))).toMatchObject({ total_tokens: 10, total_cost: null });
  });

  it('the v2 read API, the filters, the threads and the project stats read the roll-up', async () => {
    const { id: projectId } = await client.readProject({ projectName: project });
    const since = new Date(T0 - 60_000).toISOString();
    const v2 = await client.runs.retrieve(root.id, { project_id: projectId, selects: ['TOTAL_TOKENS', 'PROMPT_TOKENS', 'TOTAL_COST', 'COMPLETION_COST'] });
    expect(v2).toEqual({ id: root.id, total_tokens: 3120, prompt_tokens: 1100, total_cost: 0.00435, completion_cost: 0.0032 });
    const big = await collect(client.runs.query({ project_ids: [projectId], filter: 'gte(total_tokens, 3100)', selects: ['NAME'], min_start_time: since }));
    expect(big.map((r) => r.name)).toEqual(['agent']);
    const costly = await collect(client.listRuns({ projectName: project, filter: 'gt(total_cost, 0.004)' }));
    expect(costly.map((r) => r.id)).toEqual([root.id]);

    const [trace] = await collect(client.traces.query({ project_id: projectId, min_start_time: since }));
    expect(trace!.trace_aggregates).toEqual({ total_tokens: 3120, total_cost: 0.00435, first_token_time: new Date(T0 + 300).toISOString() });
    const [thread] = await collect(client.threads.query({ project_id: projectId, min_start_time: since }));
    expect(thread).toMatchObject({ thread_id: 'th-late', total_tokens: 3120, total_cost: 0.00435 });

    // The console's project chart: each token counted once (the llm runs', not again the root's).
    const res = await fetch(`${stack.gateway.url}/sessions/stats`, {
      method: 'POST',
      headers: { 'x-api-key': stack.keyA, 'content-type': 'application/json' },
      body: JSON.stringify({ session: [projectId], start_time: since, end_time: new Date(T0 + 60_000).toISOString() }),
    });
    const stats = ((await res.json()) as Json).projects[0].stats;
    expect(stats).toMatchObject({ total_tokens: 3120, prompt_tokens: 1100, total_cost: 0.00435 });
  });
});

describe('patches', () => {
  const project = `rollups-patches-${randomUUID()}`;
  const root = node(project, 'agent', 'chain', 0);
  const early = node(project, 'patched-first', 'llm', 10, root, model('gpt-4o'));
  const later = node(project, 'tokens-later', 'llm', 20, root, { extra: { invocation_params: { model: 'gpt-4o-mini' } } });

  it("a patch that comes before its run's create counts when the create arrives", async () => {
    await client.createRun({ ...root, end_time: T0 + 1000 });
    await client.updateRun(early.id, patchOf(early, { end_time: T0 + 500, ...usage(10, 5) }));
    expect(usageOf(await client.readRun(root.id))).toMatchObject({ total_tokens: null });
    await client.createRun(early);
    // gpt-4o: $2.50 and $10 per million.
    expect(usageOf(await client.readRun(root.id))).toEqual({
      prompt_tokens: 10,
      completion_tokens: 5,
      total_tokens: 15,
      prompt_cost: 0.000025,
      completion_cost: 0.00005,
      total_cost: 0.000075,
    });
  });

  it("a child's tokens patched later, then patched again, are rolled up and priced again", async () => {
    await client.createRun(later);
    expect(usageOf(await client.readRun(root.id))).toMatchObject({ total_tokens: 15, total_cost: 0.000075 });
    await client.updateRun(later.id, patchOf(later, { end_time: T0 + 600, ...usage(200, 100) }));
    expect(usageOf(await client.readRun(later.id))).toMatchObject({ prompt_cost: 0.00003, completion_cost: 0.00006, total_cost: 0.00009 });
    expect(usageOf(await client.readRun(root.id))).toMatchObject({ total_tokens: 315, total_cost: 0.000165 });
    await client.updateRun(later.id, patchOf(later, { ...usage(400, 100) }));
    expect(usageOf(await client.readRun(later.id))).toMatchObject({ total_tokens: 500, total_cost: 0.00012 });
    expect(usageOf(await client.readRun(root.id))).toEqual({
      prompt_tokens: 410,
      completion_tokens: 105,
      total_tokens: 515,
      prompt_cost: 0.000085,
      completion_cost: 0.00011,
      total_cost: 0.000195,
    });
  });

  it('costs a patch sends replace the priced ones and stay', async () => {
    await client.updateRun(later.id, patchOf(later, { ...usage(400, 100, { input_cost: 0.5, output_cost: 0.25 }) }));
    await client.updateRun(later.id, patchOf(later, { end_time: T0 + 700 }));
    expect(usageOf(await client.readRun(later.id))).toMatchObject({ prompt_cost: 0.5, completion_cost: 0.25, total_cost: 0.75 });
    expect(usageOf(await client.readRun(root.id))).toMatchObject({ total_tokens: 515, total_cost: 0.750075 });
  });
});

describe("from the attacker's side", () => {
  it("runs of another tenant, or of another project's credential, naming a trace as theirs add nothing to it", async () => {
    const project = `rollups-victim-${randomUUID()}`;
    const root = node(project, 'agent', 'chain', 0);
    await client.createRun({ ...root, end_time: T0 + 1000 });
    const bound = await boundCredentialServer(stack, { id: randomUUID(), name: `some-deployment-${randomUUID()}` });
    try {
      for (const apiUrl of [stack.gateway.url, bound.url]) {
        const attacker = new Client({ apiUrl, apiKey: apiUrl === bound.url ? stack.keyA : stack.keyB, autoBatchTracing: false });
        const own = node('attacker', 'agent', 'chain', 0);
        await attacker.createRun({ ...own, end_time: T0 + 1000 });
        await attacker.createRun({ ...node('attacker', 'llm', 'llm', 10, own), trace_id: root.id, end_time: T0 + 500, ...usage(1_000_000, 1_000_000) });
      }
    } finally {
      await bound.close();
    }
    expect(usageOf(await client.readRun(root.id))).toMatchObject({ total_tokens: null, total_cost: null });
  });
});
