/**
 * Every route of the agent server answers what its OpenAPI document (/openapi.json, the same zod
 * schemas the routes declare) says: for a representative call of each documented operation, the
 * status is a documented success status and the body validates against the documented schema
 * (objects are closed: a field the schema does not declare fails). A route added without a call
 * here fails the coverage check.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { z } from 'zod';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import type { RunningAgentServer } from './index.js';
import { human, startTestServer, until } from './__tests__/fixtures.js';

let db: TestDatabase;
let server: RunningAgentServer;

type Json = any;
interface Operation {
  statuses: Record<string, { content?: Record<string, { schema: Json }> }>;
}
let document: { paths: Record<string, Record<string, { responses: Operation['statuses'] }>>; components: { schemas: Record<string, Json> } };

async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${server.url}${path}`, {
    method: method.toUpperCase(),
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}
async function json(method: string, path: string, body?: unknown): Promise<Json> {
  const res = await call(method, path, body);
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res.json();
}

/** The zod schema of a documented JSON response (its component references resolved). */
function documented(schema: Json): z.ZodType {
  const local = JSON.parse(JSON.stringify({ ...schema, $defs: document.components.schemas }).replaceAll('#/components/schemas/', '#/$defs/'));
  return z.fromJSONSchema(local);
}

/** Fixtures the calls refer to: created once, each in the state its calls need. */
const f: Record<string, string> = {};

beforeAll(async () => {
  db = await createTestDatabase('agentresp');
  server = await startTestServer(db.url, { leaseMs: 30_000 });
  document = await json('get', '/openapi.json');

  f.assistant = (await json('post', '/assistants', { graph_id: 'echo', name: 'resp', context: { model_name: 'm' }, metadata: { suite: 'resp' } })).assistant_id;
  await json('patch', `/assistants/${f.assistant}`, { context: { model_name: 'n' } });
  // A thread stopped at an interrupt (open interrupts, a pending task), with a finished run.
  f.thread = (await json('post', '/threads', { metadata: { suite: 'resp' } })).thread_id;
  const run = await call('post', `/threads/${f.thread}/runs/wait`, { assistant_id: 'interrupt', input: { question: 'q?' } });
  f.run = run.headers.get('content-location')!.split('/').at(-1)!;
  await run.json();
  f.checkpoint = (await json('get', `/threads/${f.thread}/state`)).checkpoint.checkpoint_id;
  // A thread stopped inside a subgraph (nested state with subgraphs=true, a task checkpoint without).
  f.nested = (await json('post', '/threads', {})).thread_id;
  await json('post', `/threads/${f.nested}/runs/wait`, { assistant_id: 'nested_interrupt', input: { step: 'start' } });
  // A thread whose run failed (the thread carries the error).
  f.failed = (await json('post', '/threads', {})).thread_id;
  await json('post', `/threads/${f.failed}/runs/wait`, { assistant_id: 'echo', input: { messages: [{ role: 'nobody', content: 'x' }] } });
  // A stateless cron (no thread), paused so it never fires here.
  f.cron = (await json('post', '/runs/crons', { assistant_id: 'echo', schedule: '0 9 * * *', enabled: false, metadata: { suite: 'resp' } })).cron_id;
  // Runs to cancel: running for a while.
  for (const name of ['cancel', 'cancelWait']) {
    const thread = (await json('post', '/threads', {})).thread_id;
    const slow = await json('post', `/threads/${thread}/runs`, { assistant_id: 'slow', input: {}, context: { delay_ms: 3_600_000 } }); // Still running when the cancel test comes, however long the ones before it take.
    await until(
      () => json('get', `/threads/${thread}/runs/${slow.run_id}`),
      (r) => r.status === 'running',
    );
    f[`${name}Thread`] = thread;
    f[name] = slow.run_id;
  }
}, 120_000);
afterAll(async () => {
  await server?.close();
  await db?.drop();
});

/** Representative calls of every operation ("method path" as documented); several where the answer's shape varies. */
const calls: Record<string, (() => Promise<Response>)[]> = {
  'get /ok': [() => call('get', '/ok'), () => call('get', '/ok?check_db=1')],
  'get /info': [() => call('get', '/info')],
  'post /ui/{assistant_id}': [() => call('post', '/ui/echo', { name: 'card' })],
  'get /ui/{ui_name}/{file}': [() => call('get', '/ui/echo/entrypoint.js')],

  'post /assistants': [() => call('post', '/assistants', { graph_id: 'echo', config: { tags: ['t'], recursion_limit: 5 }, description: 'd' })],
  'post /assistants/search': [
    () => call('post', '/assistants/search', { graph_id: 'echo' }),
    () => call('post', '/assistants/search', { metadata: { suite: 'resp' }, select: ['assistant_id', 'version'] }),
  ],
  'post /assistants/count': [() => call('post', '/assistants/count', {})],
  'get /assistants/{assistant_id}': [() => call('get', `/assistants/${f.assistant}`), () => call('get', '/assistants/echo')],
  'patch /assistants/{assistant_id}': [() => call('patch', `/assistants/${f.assistant}`, { metadata: { more: 1 } })],
  'delete /assistants/{assistant_id}': [async () => call('delete', `/assistants/${(await json('post', '/assistants', { graph_id: 'echo' })).assistant_id}`)],
  'post /assistants/{assistant_id}/latest': [() => call('post', `/assistants/${f.assistant}/latest`, { version: 1 })],
  'post /assistants/{assistant_id}/versions': [() => call('post', `/assistants/${f.assistant}/versions`, {})],
  'get /assistants/{assistant_id}/schemas': [() => call('get', '/assistants/echo/schemas'), () => call('get', '/assistants/builder/schemas')],
  'get /assistants/{assistant_id}/subgraphs': [() => call('get', '/assistants/subgraph/subgraphs?recurse=true')],
  'get /assistants/{assistant_id}/subgraphs/{namespace}': [() => call('get', '/assistants/subgraph/subgraphs/child')],
  'get /assistants/{assistant_id}/graph': [() => call('get', '/assistants/echo/graph'), () => call('get', '/assistants/subgraph/graph?xray=true')],

  'post /threads': [() => call('post', '/threads', { metadata: { a: 1 } })],
  'post /threads/search': [
    () => call('post', '/threads/search', { metadata: { suite: 'resp' } }),
    () => call('post', '/threads/search', { ids: [f.failed], select: ['thread_id', 'status', 'error'] }),
  ],
  'post /threads/count': [() => call('post', '/threads/count', { status: 'interrupted' })],
  'get /threads/{thread_id}': [() => call('get', `/threads/${f.thread}`), () => call('get', `/threads/${f.failed}`), () => call('get', `/threads/${f.nested}`)],
  'patch /threads/{thread_id}': [() => call('patch', `/threads/${f.thread}`, { metadata: { b: 2 } })],
  'delete /threads/{thread_id}': [async () => call('delete', `/threads/${(await json('post', '/threads', {})).thread_id}`)],
  'post /threads/{thread_id}/copy': [() => call('post', `/threads/${f.thread}/copy`)],
  'post /threads/prune': [
    async () => call('post', '/threads/prune', { thread_ids: [(await json('post', '/threads', {})).thread_id], strategy: 'keep_latest' }),
  ],
  'get /threads/{thread_id}/stream': [
    async () => {
      // The stream stays open until the thread is deleted.
      const thread = (await json('post', '/threads', {})).thread_id;
      const res = await call('get', `/threads/${thread}/stream`);
      await call('delete', `/threads/${thread}`);
      return res;
    },
  ],
  'get /threads/{thread_id}/state': [
    () => call('get', `/threads/${f.thread}/state`),
    () => call('get', `/threads/${f.nested}/state`),
    () => call('get', `/threads/${f.nested}/state?subgraphs=true`),
    async () => call('get', `/threads/${(await json('post', '/threads', {})).thread_id}/state`),
  ],
  'post /threads/{thread_id}/state': [
    async () => {
      const thread = (await json('post', '/threads', {})).thread_id;
      await json('post', `/threads/${thread}/runs/wait`, { assistant_id: 'echo', input: human('hi') });
      return call('post', `/threads/${thread}/state`, { values: { messages: [{ role: 'user', content: 'more' }] }, as_node: 'respond' });
    },
  ],
  'get /threads/{thread_id}/state/{checkpoint_id}': [() => call('get', `/threads/${f.thread}/state/${f.checkpoint}?subgraphs=true`)],
  'post /threads/{thread_id}/state/checkpoint': [() => call('post', `/threads/${f.thread}/state/checkpoint`, { checkpoint: { checkpoint_id: f.checkpoint } })],
  'get /threads/{thread_id}/history': [() => call('get', `/threads/${f.thread}/history?limit=5`), () => call('get', `/threads/${f.nested}/history`)],
  'post /threads/{thread_id}/history': [() => call('post', `/threads/${f.thread}/history`, { limit: 2, before: f.checkpoint })],

  'post /threads/{thread_id}/runs': [
    () => call('post', `/threads/${f.thread}/runs`, { assistant_id: 'interrupt', command: { resume: 'yes' }, interrupt_before: ['finish'] }),
  ],
  'post /threads/{thread_id}/runs/stream': [
    async () => call('post', `/threads/${(await json('post', '/threads', {})).thread_id}/runs/stream`, { assistant_id: 'echo', input: human('s') }),
  ],
  'post /threads/{thread_id}/runs/wait': [
    async () => call('post', `/threads/${(await json('post', '/threads', {})).thread_id}/runs/wait`, { assistant_id: f.assistant, input: human('w') }),
  ],
  'post /runs': [() => call('post', '/runs', { assistant_id: 'echo', input: human('bg'), metadata: { m: 1 }, stream_mode: ['values', 'updates'] })],
  'post /runs/stream': [() => call('post', '/runs/stream', { assistant_id: 'echo', input: human('s'), stream_mode: 'updates' })],
  'post /runs/wait': [() => call('post', '/runs/wait', { assistant_id: 'echo', input: human('w') })],
  'post /mcp': [
    () => call('post', '/mcp', { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { accept: 'application/json, text/event-stream' }),
    () => call('post', '/mcp', { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'nope' } }, { accept: 'application/json, text/event-stream' }),
    () => call('post', '/mcp', { jsonrpc: '2.0', method: 'notifications/initialized' }, { accept: 'application/json, text/event-stream' }),
  ],
  'delete /mcp': [() => call('delete', '/mcp')],
  // While the fixtures' slow runs still run (the cancel calls come after): the queue is not empty.
  'post /runs/search': [() => call('post', '/runs/search', {}), () => call('post', '/runs/search', { status: ['running'], limit: 1, offset: 1 })],
  'post /runs/cancel': [async () => call('post', '/runs/cancel', { thread_id: (await json('post', '/threads', {})).thread_id, status: 'all' })],
  'post /a2a/{assistant_id}': [
    () =>
      call('post', '/a2a/echo', {
        jsonrpc: '2.0',
        id: 1,
        method: 'SendMessage',
        params: { message: { messageId: 'm', role: 'ROLE_USER', parts: [{ text: 'a2a' }] } },
      }),
    () => call('post', '/a2a/echo', { jsonrpc: '2.0', id: 2, method: 'tasks/get', params: { id: f.run } }),
  ],
  'get /a2a/{assistant_id}/.well-known/agent-card.json': [() => call('get', '/a2a/echo/.well-known/agent-card.json')],
  'get /.well-known/agent-card.json': [() => call('get', `/.well-known/agent-card.json?assistant_id=${f.assistant}`, undefined, { 'a2a-version': '0.3' })],
  'post /runs/batch': [
    () =>
      call('post', '/runs/batch', [
        { assistant_id: 'echo', input: human('b1') },
        { assistant_id: 'echo', input: human('b2') },
      ]),
  ],
  'get /threads/{thread_id}/runs': [() => call('get', `/threads/${f.thread}/runs`)],
  'get /threads/{thread_id}/runs/{run_id}': [() => call('get', `/threads/${f.thread}/runs/${f.run}`)],
  'delete /threads/{thread_id}/runs/{run_id}': [
    async () => {
      const thread = (await json('post', '/threads', {})).thread_id;
      const run = await call('post', `/threads/${thread}/runs/wait`, { assistant_id: 'echo', input: human('x') });
      await run.json();
      return call('delete', run.headers.get('content-location')!);
    },
  ],
  'get /threads/{thread_id}/runs/{run_id}/join': [() => call('get', `/threads/${f.thread}/runs/${f.run}/join`)],
  'get /threads/{thread_id}/runs/{run_id}/webhooks': [() => call('get', `/threads/${f.thread}/runs/${f.run}/webhooks`)],
  'get /threads/{thread_id}/runs/{run_id}/stream': [() => call('get', `/threads/${f.thread}/runs/${f.run}/stream`)],
  'post /threads/{thread_id}/runs/{run_id}/cancel': [
    () => call('post', `/threads/${f.cancelThread}/runs/${f.cancel}/cancel`),
    () => call('post', `/threads/${f.cancelWaitThread}/runs/${f.cancelWait}/cancel?wait=true`),
  ],

  'post /runs/crons': [
    () =>
      call('post', '/runs/crons', {
        assistant_id: 'echo',
        schedule: '0 9 * * 1-5',
        timezone: 'Europe/Paris',
        end_time: '2999-01-01T00:00:00Z',
        input: human('c'),
        enabled: false,
      }),
  ],
  'post /threads/{thread_id}/runs/crons': [
    () => call('post', `/threads/${f.thread}/runs/crons`, { assistant_id: 'echo', schedule: '@daily', multitask_strategy: 'reject', enabled: false }),
  ],
  'post /runs/crons/search': [
    () => call('post', '/runs/crons/search', { metadata: { suite: 'resp' } }),
    () => call('post', '/runs/crons/search', { assistant_id: 'echo', select: ['cron_id', 'next_run_date', 'now'], sort_by: 'next_run_date' }),
  ],
  'post /runs/crons/count': [() => call('post', '/runs/crons/count', { enabled: false })],
  'get /runs/crons/{cron_id}': [() => call('get', `/runs/crons/${f.cron}`)],
  'patch /runs/crons/{cron_id}': [() => call('patch', `/runs/crons/${f.cron}`, { schedule: '0 10 * * *', end_time: null, metadata: { more: 1 } })],
  'delete /runs/crons/{cron_id}': [
    async () => call('delete', `/runs/crons/${(await json('post', '/runs/crons', { assistant_id: 'echo', schedule: '* * * * *', enabled: false })).cron_id}`),
  ],
  'put /store/items': [() => call('put', '/store/items', { namespace: ['resp', 'a'], key: 'k', value: { n: 1 }, ttl: 60, index: null })],
  'get /store/items': [
    async () => {
      await call('put', '/store/items', { namespace: ['resp', 'b'], key: 'k', value: { n: 2 } });
      return call('get', '/store/items?namespace=resp.b&key=k&refresh_ttl=true');
    },
  ],
  'delete /store/items': [() => call('delete', '/store/items', { namespace: ['resp', 'a'], key: 'gone' })],
  'post /store/items/search': [() => call('post', '/store/items/search', { namespace_prefix: ['resp'], filter: { n: { $gte: 1 } }, limit: 5 })],
  'post /store/namespaces': [() => call('post', '/store/namespaces', { prefix: ['resp'], max_depth: 2 })],
  'post /threads/{thread_id}/commands': [
    () => call('post', `/threads/${f.thread}/commands`, { id: 1, method: 'state.get', params: {} }),
    () => call('post', `/threads/${f.thread}/commands`, { id: 2, method: 'no.such' }),
  ],
  // The stream stays open across runs: its headers are what there is to check.
  'post /threads/{thread_id}/stream/events': [
    async () => {
      const abort = new AbortController();
      const res = await fetch(`${server.url}/threads/${f.thread}/stream/events`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ channels: ['values'] }),
        signal: abort.signal,
      });
      abort.abort();
      return new Response('', { status: res.status, headers: res.headers });
    },
  ],
};

describe('the OpenAPI document', () => {
  it('has a representative call here for every operation it lists', () => {
    const operations = Object.entries(document.paths).flatMap(([path, methods]) => Object.keys(methods).map((method) => `${method} ${path}`));
    expect(Object.keys(calls).sort()).toEqual(operations.filter((o) => !o.startsWith('get /openapi.json') && !o.startsWith('get /docs')).sort());
  });

  it('is exercised with answers of every shape: open interrupts, a failed run, nested subgraph state', async () => {
    expect(await json('get', `/threads/${f.failed}`)).toMatchObject({ status: 'error', error: { error: expect.any(String), message: expect.any(String) } });
    const nested = await json('get', `/threads/${f.nested}/state?subgraphs=true`);
    expect(nested.tasks[0]).toMatchObject({
      name: 'child',
      checkpoint: null,
      state: { next: ['ask'], tasks: [{ name: 'ask', interrupts: [{ value: 'child asks' }] }] },
    });
    expect((await json('get', `/threads/${f.nested}/state`)).tasks[0]).toMatchObject({
      checkpoint: { checkpoint_ns: expect.stringMatching(/^child:/) },
      state: null,
    });
  });

  it('names the shapes the routes share', () => {
    expect(Object.keys(document.components.schemas)).toEqual(expect.arrayContaining(['Assistant', 'AssistantVersion', 'Thread', 'ThreadState', 'Run', 'Cron']));
  });
});

describe.each(Object.keys(calls))('%s', (operation) => {
  it('answers a documented status with a body its documented schema accepts', async () => {
    const [method, path] = operation.split(' ') as [string, string];
    const responses = document.paths[path]![method]!.responses;
    for (const [i, send] of calls[operation]!.entries()) {
      const res = await send();
      const text = await res.text();
      const documentedStatus = responses[String(res.status)];
      expect({ call: i, status: res.status, documented: documentedStatus !== undefined && res.status < 300 }).toEqual({
        call: i,
        status: res.status,
        documented: true,
      });
      const content = documentedStatus!.content ?? {};
      if (content['text/event-stream']) {
        expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
        continue;
      }
      const written = Object.keys(content).filter((type) => type !== 'application/json');
      if (written.length > 0) {
        // A body the handler writes itself (HTML, a script): of a documented type, not empty.
        expect(written).toContain(res.headers.get('content-type')?.split(';')[0]);
        expect(text).not.toBe('');
        continue;
      }
      if (!content['application/json']) {
        expect(text).toBe('');
        continue;
      }
      const parsed = documented(content['application/json'].schema).safeParse(JSON.parse(text));
      expect({ call: i, issues: parsed.success ? [] : parsed.error.issues, body: parsed.success ? undefined : JSON.parse(text) }).toEqual({
        call: i,
        issues: [],
        body: undefined,
      });
    }
  });
});
