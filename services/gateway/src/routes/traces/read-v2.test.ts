/**
 * The read API of the `langsmith` SDK's generated resource clients (0.12: `client.runs.query()`,
 * `client.runs.retrieve()`, `client.traces.*`, `client.threads.*`, `client.sessions.*`,
 * `client.info`), called through the SDK's own methods against a real gateway, export-worker and
 * Postgres: each returns what was traced, the SDK prints no warning, and another tenant (or a
 * tracing credential of another project) reads nothing.
 */
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import type { RunningServer } from '@berth/http';
import { Client, Langsmith } from 'langsmith';
import { traceable } from 'langsmith/traceable';
import { boundCredentialServer, startTraceStack, type TraceStack } from '../../__tests__/trace-stack.js';

type Json = Record<string, any>;

let stack: TraceStack;
let client: Client;
let projectId: string;
/** Root run ids: two turns of thread-one, one failed turn of thread-two, one trace of no thread. */
const roots: { one: string[]; two: string[]; none: string[] } = { one: [], two: [], none: [] };
/** What the SDK printed through console.warn (its version and deprecation warnings go there). */
const warnings: string[] = [];
const PROJECT = 'read-v2-agent';

const clientOf = (key: string, apiUrl = stack.gateway.url) => new Client({ apiUrl, apiKey: key, autoBatchTracing: true });

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

async function call(path: string, init: { method?: string; key?: string; json?: unknown } = {}) {
  const res = await fetch(`${stack.gateway.url}${path}`, {
    method: init.method ?? 'GET',
    headers: { 'x-api-key': init.key ?? stack.keyA, ...(init.json !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: init.json !== undefined ? JSON.stringify(init.json) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as Json };
}

/** One turn of an agent: a chain root with an llm child (17 tokens), in `thread` when given. */
function agentOf(thread: string | undefined, fail = false) {
  const traced = { client, project_name: PROJECT, tracingEnabled: true };
  const llm = traceable(async (q: string) => ({ content: `echo ${q}`, usage_metadata: { input_tokens: 12, output_tokens: 5, total_tokens: 17 } }), {
    name: 'fake-llm',
    run_type: 'llm',
    ...traced,
  });
  return traceable(
    async (q: string) => {
      const answer = await llm(q);
      if (fail) throw new Error('the turn failed');
      return { answer: answer.content };
    },
    { name: 'agent', run_type: 'chain', metadata: thread ? { thread_id: thread, user: 'bob' } : { user: 'bob' }, ...traced },
  );
}

beforeAll(async () => {
  jest.spyOn(console, 'warn').mockImplementation((...args: unknown[]) => void warnings.push(args.map(String).join(' ')));
  stack = await startTraceStack('gw_read_v2');
  client = clientOf(stack.keyA);
  await agentOf('thread-one')('first');
  await agentOf('thread-one')('second');
  await agentOf('thread-two', true)('third').catch(() => undefined);
  await agentOf(undefined)('alone');
  await client.awaitPendingTraceBatches();
  projectId = (await client.readProject({ projectName: PROJECT })).id;
  const rootRuns = await collect(client.runs.query({ project_ids: [projectId], is_root: true, selects: ['THREAD_ID', 'START_TIME'] }));
  for (const run of rootRuns.sort((a, b) => a.start_time!.localeCompare(b.start_time!))) {
    const key = run.thread_id === 'thread-one' ? 'one' : run.thread_id === 'thread-two' ? 'two' : 'none';
    roots[key].push(run.id!);
  }
}, 60_000);
afterAll(async () => {
  await stack?.close();
  jest.restoreAllMocks();
});

describe('runs', () => {
  it('client.runs.query() answers the runs traced, with the fields selected only', async () => {
    const runs = await collect(
      client.runs.query({ project_ids: [projectId], selects: ['NAME', 'RUN_TYPE', 'STATUS', 'TOTAL_TOKENS', 'THREAD_ID', 'METADATA', 'INPUTS', 'IS_ROOT'] }),
    );
    expect(runs).toHaveLength(8);
    const llm = runs.filter((r) => r.name === 'fake-llm');
    expect(llm).toHaveLength(4);
    expect(llm[0]).toMatchObject({ run_type: 'LLM', status: 'SUCCESS', total_tokens: 17, is_root: false });
    const failed = runs.find((r) => r.id === roots.two[0])!;
    expect(failed).toMatchObject({
      name: 'agent',
      run_type: 'CHAIN',
      status: 'ERROR',
      thread_id: 'thread-two',
      metadata: { thread_id: 'thread-two', user: 'bob' },
    });
    expect(failed.inputs).toEqual({ input: 'third' });
    // Only what was selected (and the id): no outputs, no start time.
    // (The root's tokens are its trace's: rollups.test.ts.)
    expect(Object.keys(failed).sort()).toEqual(['id', 'inputs', 'is_root', 'metadata', 'name', 'run_type', 'status', 'thread_id', 'total_tokens'].sort());
    expect(Object.keys((await collect(client.runs.query({ project_ids: [projectId], is_root: true })))[0]!)).toEqual(['id']);
  });

  it('filters by run type, error, root, trace, ids and the filter language; pages by cursor, each run once', async () => {
    const ids = async (params: Json) => (await collect(client.runs.query({ project_ids: [projectId], ...params }))).map((r) => r.id).sort();
    expect(await ids({ run_type: 'LLM' })).toHaveLength(4);
    expect(await ids({ has_error: true })).toEqual(roots.two);
    expect(await ids({ is_root: true })).toEqual([...roots.one, ...roots.two, ...roots.none].sort());
    expect(await ids({ trace_id: roots.one[0] })).toHaveLength(2);
    expect(await ids({ ids: roots.one })).toEqual([...roots.one].sort());
    // The SDK gives child runs their parent's metadata: the llm runs of thread-one match too.
    expect(await ids({ is_root: true, filter: 'and(eq(metadata_key, "thread_id"), eq(metadata_value, "thread-one"))' })).toEqual([...roots.one].sort());
    expect(await ids({ min_start_time: new Date(Date.now() + 60_000).toISOString() })).toEqual([]);
    const paged = await ids({ page_size: 3 });
    expect(paged).toHaveLength(8);
    expect(new Set(paged).size).toBe(8);
    const first = await client.runs.query({ project_ids: [projectId], page_size: 3 });
    expect(first.items).toHaveLength(3);
    expect(first.hasNextPage()).toBe(true);
  });

  it("reads the projects of a dataset (experiments) with reference_dataset_id, another tenant's none", async () => {
    const dataset = randomUUID();
    const experiment = await client.sessions.create({ name: `experiment-${randomUUID()}`, reference_dataset_id: dataset });
    await traceable(async () => 'scored', { name: 'eval', client, project_name: experiment.name!, tracingEnabled: true })();
    await client.awaitPendingTraceBatches();
    const runs = await collect(client.runs.query({ reference_dataset_id: dataset, selects: ['NAME', 'PROJECT_ID'] }));
    expect(runs).toEqual([{ id: expect.any(String), name: 'eval', project_id: experiment.id }]);
    expect(await collect(clientOf(stack.keyB).runs.query({ reference_dataset_id: dataset }))).toEqual([]);
  });

  it('client.runs.retrieve() answers a run of its project; of another project or an unknown id, 404', async () => {
    const run = await client.runs.retrieve(roots.one[0]!, { project_id: projectId, selects: ['NAME', 'OUTPUTS', 'LATENCY_SECONDS', 'TRACE_ID'] });
    expect(run).toMatchObject({ id: roots.one[0], name: 'agent', outputs: { answer: 'echo first' }, trace_id: roots.one[0] });
    expect(run.latency_seconds).toBeGreaterThanOrEqual(0);
    const other = await client.sessions.create({ name: `other-${randomUUID()}` });
    await expect(client.runs.retrieve(roots.one[0]!, { project_id: other.id })).rejects.toMatchObject({ status: 404 });
    await expect(client.runs.retrieve(randomUUID(), { project_id: projectId })).rejects.toMatchObject({ status: 404 });
    await expect(client.runs.retrieve('not-a-run', { project_id: projectId })).rejects.toMatchObject({ status: 404 });
    await expect(client.runs.retrieve(roots.one[0]!, { project_id: 'not-a-project' })).rejects.toMatchObject({ status: 404 });
  });
});

describe('traces', () => {
  it('client.traces.query() answers each trace: its root run and the tokens of its llm runs', async () => {
    const traces = await collect(client.traces.query({ project_id: projectId, selects: ['NAME', 'STATUS'] }));
    expect(traces.map((t) => t.root_run!.id).sort()).toEqual([...roots.one, ...roots.two, ...roots.none].sort());
    for (const trace of traces) expect(trace.trace_aggregates).toMatchObject({ total_tokens: 17 });
    const failed = traces.find((t) => t.root_run!.id === roots.two[0])!;
    expect(failed.root_run).toEqual({ id: roots.two[0], name: 'agent', status: 'ERROR' });
    const picked = await collect(client.traces.query({ project_id: projectId, trace_ids: roots.one, trace_filter: 'eq(status, "success")' }));
    expect(picked.map((t) => t.root_run!.id).sort()).toEqual([...roots.one].sort());
  });

  it("client.traces.listRuns() answers a trace's runs in tree order; a trace of another project, 404", async () => {
    const { items } = await client.traces.listRuns(roots.one[1]!, { project_id: projectId, selects: ['NAME', 'PARENT_RUN_IDS', 'TOTAL_TOKENS'] });
    expect(items).toEqual([
      { id: roots.one[1], name: 'agent', parent_run_ids: [], total_tokens: 17 },
      { id: expect.any(String), name: 'fake-llm', parent_run_ids: [roots.one[1]], total_tokens: 17 },
    ]);
    const other = await client.sessions.create({ name: `other-${randomUUID()}` });
    await expect(client.traces.listRuns(roots.one[1]!, { project_id: other.id })).rejects.toMatchObject({ status: 404 });
    await expect(client.traces.listRuns('nope', { project_id: projectId })).rejects.toMatchObject({ status: 404 });
  });
});

describe('threads', () => {
  it('client.threads.query() groups the traces by the thread their metadata names, with stats', async () => {
    const threads = await collect(client.threads.query({ project_id: projectId }));
    expect(threads.map((t) => t.thread_id)).toEqual(['thread-two', 'thread-one']); // most recently active first
    const [two, one] = threads;
    expect(one).toMatchObject({ count: 2, first_trace_id: roots.one[0], last_trace_id: roots.one[1], num_errored_turns: 0, total_tokens: 34 });
    expect(two).toMatchObject({ count: 1, first_trace_id: roots.two[0], num_errored_turns: 1, total_tokens: 17 });
    expect(Date.parse(one!.min_start_time!)).toBeLessThan(Date.parse(one!.max_start_time!));
    // Filters on each trace's root: a thread is made of its traces that match.
    const failing = await collect(client.threads.query({ project_id: projectId, filter: 'eq(status, "error")' }));
    expect(failing.map((t) => [t.thread_id, t.count])).toEqual([['thread-two', 1]]);
    const both = await collect(client.threads.query({ project_id: projectId, filter: 'eq(name, "agent")', trace_filter: 'eq(status, "success")' }));
    expect(both.map((t) => [t.thread_id, t.count])).toEqual([['thread-one', 2]]);
    const paged = await client.threads.query({ project_id: projectId, page_size: 1 });
    expect(paged.items.map((t) => t.thread_id)).toEqual(['thread-two']);
    expect((await paged.getNextPage()).items.map((t) => t.thread_id)).toEqual(['thread-one']);
  });

  it('threads also group by session_id or conversation_id metadata, as LangSmith does', async () => {
    const other = clientOf(stack.keyA);
    const project = `threads-${randomUUID()}`;
    const turn = (metadata: Json) => traceable(async () => 'ok', { name: 'turn', client: other, project_name: project, tracingEnabled: true, metadata })();
    await turn({ session_id: 's-1' });
    await turn({ conversation_id: 'c-1' });
    await turn({ thread_id: 't-1', session_id: 's-1' }); // thread_id wins
    await other.awaitPendingTraceBatches();
    const { id } = await other.readProject({ projectName: project });
    const threads = await collect(client.threads.query({ project_id: id }));
    expect(Object.fromEntries(threads.map((t) => [t.thread_id, t.count]))).toEqual({ 's-1': 1, 'c-1': 1, 't-1': 1 });
    // One thread by every route: the filter language's thread_id, a thread's stats, the totals.
    const named = async (thread: string) => (await collect(client.runs.query({ project_ids: [id], filter: `eq(thread_id, "${thread}")` }))).length;
    expect([await named('s-1'), await named('c-1'), await named('t-1')]).toEqual([1, 1, 1]);
    expect(await client.threads.stats('c-1', { session_id: id, selects: ['TURNS'] })).toEqual({ turns: 1 });
    expect(await client.threads.stats('s-1', { session_id: id, selects: ['TURNS'] })).toEqual({ turns: 1 });
    expect(await client.threads.aggregateStats({ project_id: id, select: ['THREAD_COUNT', 'TRACE_COUNT'] })).toEqual({ thread_count: 3, trace_count: 3 });
  });

  it('client.threads.aggregateStats() answers the stats selected over every thread', async () => {
    const stats = await client.threads.aggregateStats({
      project_id: projectId,
      select: ['THREAD_COUNT', 'TRACE_COUNT', 'TOTAL_TOKENS', 'ERROR_RATE', 'LATENCY_P50'],
    });
    expect(stats).toEqual({ thread_count: 2, trace_count: 3, total_tokens: 51, error_rate: 1 / 3, latency_p50_seconds: expect.any(Number) });
    const ok = await client.threads.aggregateStats({ project_id: projectId, select: ['THREAD_COUNT', 'TRACE_COUNT'], trace_filter: 'eq(status, "success")' });
    expect(ok).toEqual({ thread_count: 1, trace_count: 2 });
  });

  it("client.threads.stats() answers one thread's stats; an unknown thread, 404", async () => {
    const stats = await client.threads.stats('thread-one', { session_id: projectId, selects: ['TURNS', 'TOTAL_TOKENS', 'FIRST_START_TIME', 'LAST_END_TIME'] });
    expect(stats).toEqual({ turns: 2, total_tokens: 34, first_start_time: expect.any(String), last_end_time: expect.any(String) });
    await expect(client.threads.stats('no-such-thread', { session_id: projectId, selects: ['TURNS'] })).rejects.toMatchObject({ status: 404 });
  });
});

describe('sessions and info', () => {
  it('client.sessions creates, reads, updates and deletes a project', async () => {
    const name = `made-${randomUUID()}`;
    const made = await client.sessions.create({ name, description: 'first' });
    expect(made).toMatchObject({ name, description: 'first' });
    expect(await client.sessions.retrieve(made.id)).toMatchObject({ id: made.id, name });
    expect(await client.sessions.retrieve(projectId, { include_stats: true })).toMatchObject({ id: projectId, run_count: 8 });
    expect(await client.sessions.update(made.id, { description: 'second' })).toMatchObject({ description: 'second' });
    await client.sessions.delete(made.id);
    await expect(client.sessions.retrieve(made.id)).rejects.toMatchObject({ status: 404 });
    await expect(client.sessions.retrieve('not-a-project')).rejects.toMatchObject({ status: 404 });
  });

  it("client.sessions.resolve() finds a deployment's project, and berth dev's project of that folder for LOCAL", async () => {
    expect(await client.sessions.resolve({ kind: 'AGENT', id: PROJECT, environment: 'PRODUCTION' })).toEqual({ session_id: projectId });
    const dev = await client.sessions.create({ name: `${PROJECT} (dev)` });
    expect(await client.sessions.resolve({ kind: 'AGENT', id: PROJECT, environment: 'LOCAL' })).toEqual({ session_id: dev.id });
    expect(await client.sessions.resolve({ kind: 'EXPERIMENT', id: projectId })).toEqual({ session_id: projectId });
    await expect(client.sessions.resolve({ kind: 'AGENT', id: 'nobody', environment: 'PRODUCTION' })).rejects.toMatchObject({ status: 404 });
    await expect(client.sessions.resolve({ kind: 'EVALUATOR' })).rejects.toMatchObject({ status: 404 });
  });

  it("the generated client's info.list() (/api/v1/info) reports a LangSmith version the SDK accepts", async () => {
    const info = await new Langsmith({ baseURL: stack.gateway.url, apiKey: stack.keyA }).info.list();
    expect(info).toMatchObject({ version: '0.18.0', berth_version: expect.any(String) });
  });
});

describe('bad input', () => {
  it('an unknown body field is a 422; a malformed id in a body is a 422, in a path or the project of a read a 404', async () => {
    for (const [path, json] of [
      ['/api/v2/runs/query', { project_ids: [projectId], bogus: 1 }],
      ['/api/v2/runs/query', { project_ids: ['not-a-uuid'] }],
      ['/api/v2/runs/query', {}],
      ['/api/v2/runs/query', { project_ids: [projectId], reference_dataset_id: randomUUID() }],
      ['/api/v2/runs/query', { project_ids: [projectId], selects: ['NOT_A_FIELD'] }],
      ['/api/v2/traces/query', { project_id: projectId, bogus: 1 }],
      ['/api/v2/threads/query', { project_id: projectId, ai_search: 'why' }],
      ['/api/v2/threads/stats', { project_id: projectId, select: [] }],
    ] as const) {
      const res = await call(path, { method: 'POST', json });
      expect([path, res.status]).toEqual([path, 422]);
      expect(res.body.detail[0]).toEqual(expect.objectContaining({ loc: expect.any(Array), msg: expect.any(String), type: expect.any(String) }));
    }
    for (const path of [
      `/api/v2/runs/${'x'.repeat(40)}?project_id=${projectId}`,
      `/api/v2/traces/not-a-trace/runs?project_id=${projectId}`,
      `/api/v2/traces/${randomUUID()}/runs?project_id=${projectId}`,
      `/api/v2/threads/thread-one/stats?session_id=not-a-project&selects=TURNS`,
      '/api/v1/sessions/not-a-project',
    ]) {
      expect([path, (await call(path)).status]).toEqual([path, 404]);
    }
    const badFilter = await call('/api/v2/runs/query', { method: 'POST', json: { project_ids: [projectId], filter: 'eq(name, ' } });
    expect(badFilter.status).toBe(422);
    expect(badFilter.body.detail[0].loc).toEqual(['body', 'filter']);
  });
});

describe("another tenant's key, and a tracing credential of another project", () => {
  let bound: RunningServer;
  afterAll(async () => bound?.close());

  it('read nothing of the project: empty pages and 404s on every route', async () => {
    bound = await boundCredentialServer(stack, { id: randomUUID(), name: 'some-deployment' });
    for (const intruder of [clientOf(stack.keyB), clientOf(stack.keyA, bound.url)]) {
      expect(await collect(intruder.runs.query({ project_ids: [projectId] }))).toEqual([]);
      expect(await collect(intruder.traces.query({ project_id: projectId }))).toEqual([]);
      expect(await collect(intruder.threads.query({ project_id: projectId }))).toEqual([]);
      expect(await intruder.threads.aggregateStats({ project_id: projectId, select: ['THREAD_COUNT', 'TRACE_COUNT'] })).toEqual({
        thread_count: 0,
        trace_count: 0,
      });
      for (const read of [
        () => intruder.runs.retrieve(roots.one[0]!, { project_id: projectId }),
        () => intruder.traces.listRuns(roots.one[0]!, { project_id: projectId }),
        () => intruder.threads.stats('thread-one', { session_id: projectId, selects: ['TURNS'] }),
        () => intruder.sessions.resolve({ kind: 'AGENT', id: PROJECT, environment: 'PRODUCTION' }),
        () => intruder.sessions.resolve({ kind: 'EXPERIMENT', id: projectId }),
      ]) {
        await expect(read()).rejects.toMatchObject({ status: 404 });
      }
    }
    // Another tenant may not read, change or delete it either; a tracing credential is refused any
    // project but its own (403, as on `/sessions/{id}`, whose implementation this shares).
    const other = clientOf(stack.keyB);
    await expect(other.sessions.retrieve(projectId)).rejects.toMatchObject({ status: 404 });
    await expect(clientOf(stack.keyA, bound.url).sessions.retrieve(projectId)).rejects.toMatchObject({ status: 403 });
    await expect(other.sessions.update(projectId, { description: 'mine' })).rejects.toMatchObject({ status: 404 });
    await expect(other.sessions.delete(projectId)).rejects.toMatchObject({ status: 404 });
    expect(await client.sessions.retrieve(projectId)).toMatchObject({ id: projectId, name: PROJECT });
  });
});

describe('the SDK talking to Berth', () => {
  it('printed no warning: no backend version older than it needs, no deprecation', async () => {
    // A fresh client touching every resource checks /info's version against each one's minimum
    // (sessions: 0.18.0). The check runs when /info has answered: its promise is awaited here, and
    // the check, registered on it first, has run by then.
    const fresh = clientOf(stack.keyA);
    await fresh.sessions.retrieve(projectId);
    void [fresh.runs, fresh.traces, fresh.threads];
    await (fresh as unknown as { _ensureServerInfo(): Promise<unknown> })._ensureServerInfo();
    expect(warnings).toEqual([]);
  });
});
