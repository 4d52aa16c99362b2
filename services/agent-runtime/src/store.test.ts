/**
 * The long-term store (/store and the graphs' BaseStore), driven by the official SDK against real
 * Postgres. The fixture (test-projects/store) has a graph that writes and reads the store, a toy
 * embedding (counts of eight topic words) configured as store.index, and a variant without index
 * but with custom auth that moves every namespace under the caller's identity.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { Client } from '@langchain/langgraph-sdk';
import { silentLogger } from '@berth/log';
import { ManualClock } from '@berth/clock';
import { createTestDatabase, until, type TestDatabase } from '@berth/testing';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createPool, migrate } from '@berth/db';
import { startAgentServer, type RunningAgentServer } from './index.js';
import { PostgresStore, StoreSweeper } from './storage/store.js';

const fixture = (name: string) => fileURLToPath(new URL(`../test-projects/store/${name}`, import.meta.url));
let db: TestDatabase;
let sql: pg.Pool;
let server: RunningAgentServer;
let plain: RunningAgentServer;
let client: Client;
/** The time both servers' store TTLs and sweeps run on; tests move it by hand. */
const clock = new ManualClock(Date.now());
const as = (token: string) => new Client({ apiUrl: plain.url, defaultHeaders: { Authorization: `Bearer ${token}` } });

const start = (configPath: string, extra: Record<string, unknown> = {}) =>
  startAgentServer({ configPath, databaseUrl: db.url, host: '127.0.0.1', port: 0, workers: 2, leaseMs: 1000, clock, ...extra }, silentLogger());

async function call(path: string, init: { method?: string; body?: unknown; url?: string; token?: string } = {}) {
  const res = await fetch(`${init.url ?? server.url}${path}`, {
    method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
    headers: { 'content-type': 'application/json', ...(init.token ? { authorization: `Bearer ${init.token}` } : {}) },
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown> & { detail: unknown }) : undefined };
}

/** Runs the `memory` graph once on a new thread and returns its `result`. */
async function graph(input: Record<string, unknown>, on: Client = client): Promise<unknown> {
  const thread = await on.threads.create();
  const out = (await on.runs.wait(thread.thread_id, 'memory', { input })) as { result?: unknown; __error__?: { message: string } };
  if (out.__error__) throw new Error(out.__error__.message);
  return out.result;
}

const rowCount = async (schema: string, key: string) =>
  (await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${schema}.store_items WHERE key = $1`, [key])).rows[0]!.n;

beforeAll(async () => {
  db = await createTestDatabase('agent');
  sql = new pg.Pool({ connectionString: db.url, max: 2 });
  // Sweeps expired items every 10 s of the clock; the other server every minute.
  server = await start(fixture('langgraph.json'), { storeSweepIntervalMs: 10_000 });
  plain = await start(fixture('langgraph.noindex.json'), { schema: 'agent_plain' });
  client = new Client({ apiUrl: server.url });
}, 60_000);
afterAll(async () => {
  await server?.close();
  await plain?.close();
  await sql?.end();
  await db?.drop();
});

describe('items', () => {
  it('puts, gets, replaces and deletes an item', async () => {
    await client.store.putItem(['users', 'u1'], 'prefs', { theme: 'dark' });
    // The SDK types say createdAt; the wire (and the object the SDK returns) has created_at too.
    type Wire = { created_at: string; updated_at: string; value: unknown };
    const first = (await client.store.getItem(['users', 'u1'], 'prefs')) as unknown as Wire;
    expect(first).toMatchObject({ namespace: ['users', 'u1'], key: 'prefs', value: { theme: 'dark' } });
    expect(Date.parse(first.created_at)).toBeGreaterThan(0);

    await client.store.putItem(['users', 'u1'], 'prefs', { theme: 'light' });
    const second = (await client.store.getItem(['users', 'u1'], 'prefs')) as unknown as Wire;
    expect(second.value).toEqual({ theme: 'light' });
    expect(second.created_at).toBe(first.created_at);
    expect(Date.parse(second.updated_at)).toBeGreaterThanOrEqual(Date.parse(first.updated_at));

    await client.store.deleteItem(['users', 'u1'], 'prefs');
    // A missing item is 200 null, which the SDK's getItem returns as null (a 404 would throw).
    expect(await client.store.getItem(['users', 'u1'], 'prefs')).toBeNull();
    expect(await call('/store/items?namespace=users.u1&key=prefs')).toEqual({ status: 200, body: null });
    // Deleting what is not there is fine.
    await client.store.deleteItem(['users', 'u1'], 'prefs');
  });

  it('refuses bad input with 422 and where it is', async () => {
    const put = (body: unknown) => call('/store/items', { method: 'PUT', body });
    const loc = (r: { body?: { detail: unknown } }) => (r.body!.detail as { loc: unknown[] }[]).map((d) => d.loc.join('.'));
    expect(loc(await put({ namespace: ['a.b'], key: 'k', value: {} }))).toEqual(['body.namespace.0']);
    expect(loc(await put({ namespace: [], key: 'k', value: {} }))).toEqual(['body.namespace']);
    expect(loc(await put({ namespace: ['a'], key: 'k', value: [1] }))).toEqual(['body.value']);
    expect(loc(await put({ namespace: ['a'], key: 'k', value: {}, ttl: -1 }))).toEqual(['body.ttl']);
    expect(loc(await put({ namespace: ['a'], key: 'k', value: {}, extra: 1 }))).toEqual(['body.extra']);
    expect((await call('/store/items?namespace=a')).status).toBe(422);
    const search = await call('/store/items/search', { body: { filter: { n: { $regex: 'x' } } } });
    expect(search.status).toBe(422);
    expect(loc(search)).toEqual(['body.filter.n.$regex']);
    expect(loc(await call('/store/items/search', { body: { filter: { n: { $gt: [1] } } } }))).toEqual(['body.filter.n.$gt']);
    expect(loc(await call('/store/namespaces', { body: { max_depth: 0 } }))).toEqual(['body.max_depth']);
    // The SDK checks labels itself before sending.
    await expect(client.store.putItem(['a.b'], 'k', {})).rejects.toThrow(/periods/);
  });
});

describe('search', () => {
  beforeAll(async () => {
    for (const [ns, key, value] of [
      [['docs', 'a'], 'one', { kind: 'note', n: 1, text: 'x' }],
      [['docs', 'a'], 'two', { kind: 'note', n: 5, text: 'x' }],
      [['docs', 'b'], 'three', { kind: 'task', n: 10, text: 'x' }],
      [['docs', 'b', 'deep'], 'four', { kind: 'note', n: 20, text: 'x', tags: ['x'] }],
      [['other'], 'five', { kind: 'note', n: 1, text: 'x' }],
    ] as const) {
      await client.store.putItem([...ns], key, value as Record<string, unknown>, { index: false });
    }
  });

  it('finds items under a namespace prefix, newest first', async () => {
    const { items } = await client.store.searchItems(['docs']);
    expect(items.map((i) => i.key)).toEqual(['four', 'three', 'two', 'one']);
    expect(items[0]).toMatchObject({ namespace: ['docs', 'b', 'deep'], score: null });
    expect((await client.store.searchItems(['docs', 'b'])).items.map((i) => i.key)).toEqual(['four', 'three']);
  });

  it('filters on value fields with equality and comparison operators', async () => {
    const keys = async (filter: Record<string, unknown>) => (await client.store.searchItems(['docs'], { filter })).items.map((i) => i.key).sort();
    expect(await keys({ kind: 'note' })).toEqual(['four', 'one', 'two']);
    expect(await keys({ kind: { $ne: 'note' } })).toEqual(['three']);
    expect(await keys({ n: { $gt: 1, $lte: 10 } })).toEqual(['three', 'two']);
    expect(await keys({ n: { $gte: 10 }, kind: { $eq: 'note' } })).toEqual(['four']);
    expect(await keys({ n: { $lt: 5 } })).toEqual(['one']);
    expect(await keys({ kind: { $gt: 'su' } })).toEqual(['three']);
    expect(await keys({ tags: ['x'] })).toEqual(['four']);
    expect(await keys({ missing: 1 })).toEqual([]);
  });

  it('pages with limit and offset', async () => {
    const page = async (offset: number) => (await client.store.searchItems(['docs'], { limit: 3, offset })).items.map((i) => i.key);
    expect(await page(0)).toEqual(['four', 'three', 'two']);
    expect(await page(3)).toEqual(['one']);
    expect(await page(4)).toEqual([]);
  });

  it('lists namespaces by prefix, suffix (with wildcards) and max depth', async () => {
    const list = async (options: Parameters<Client['store']['listNamespaces']>[0]) => (await client.store.listNamespaces(options)).namespaces;
    expect(await list({ prefix: ['docs'] })).toEqual([
      ['docs', 'a'],
      ['docs', 'b'],
      ['docs', 'b', 'deep'],
    ]);
    expect(await list({ prefix: ['docs'], maxDepth: 2 })).toEqual([
      ['docs', 'a'],
      ['docs', 'b'],
    ]);
    expect(await list({ prefix: ['*', 'b'] })).toEqual([
      ['docs', 'b'],
      ['docs', 'b', 'deep'],
    ]);
    expect(await list({ suffix: ['deep'] })).toEqual([['docs', 'b', 'deep']]);
    expect(await list({ prefix: ['docs'], suffix: ['*', 'b'] })).toEqual([['docs', 'b']]);
    expect(await list({ prefix: ['docs'], limit: 1, offset: 1 })).toEqual([['docs', 'b']]);
    expect(await list({ maxDepth: 1 })).toEqual(expect.arrayContaining([['docs'], ['other']]));
  });
});

describe('semantic search', () => {
  it('ranks items by similarity of their indexed fields to the query', async () => {
    await client.store.putItem(['pets'], 'c', { text: 'a cat, another cat and a fish' });
    await client.store.putItem(['pets'], 'd', { text: 'the dog chased the dog next door' });
    await client.store.putItem(['pets'], 'b', { text: 'a bird in a tree' });
    // Indexed by `title` instead of the configured `text`.
    await client.store.putItem(['pets'], 't', { title: 'music for my dog', text: 'cat cat cat' }, { index: ['title'] });
    await client.store.putItem(['pets'], 'x', { text: 'cat cat cat' }, { index: false });

    const { items } = await client.store.searchItems(['pets'], { query: 'my cat' });
    expect(items).toHaveLength(5);
    expect(items[0]!.key).toBe('c');
    expect(items[0]!.score).toBeGreaterThan(0.5);
    // Not embedded: found by the prefix, ranked last, without a score.
    expect(items.at(-1)).toMatchObject({ key: 'x', score: null });
    const dog = await client.store.searchItems(['pets'], { query: 'dog', limit: 2 });
    expect(dog.items.map((i) => i.key)).toEqual(['d', 't']);
    expect(dog.items[0]!.score!).toBeGreaterThan(dog.items[1]!.score!);
    // A query combines with filters.
    await client.store.putItem(['pets'], 'd2', { text: 'dog', owner: 'ann' });
    expect((await client.store.searchItems(['pets'], { query: 'dog', filter: { owner: 'ann' } })).items.map((i) => i.key)).toEqual(['d2']);
  });

  it('serves the same embeddings to graph code', async () => {
    const found = (await graph({ op: 'search', namespace: ['pets'], query: 'bird tree' })) as { key: string; score: number | null }[];
    expect(found[0]).toMatchObject({ key: 'b' });
    expect(found[0]!.score).toBeGreaterThan(0.9);
  });

  it('refuses a query (422) where store.index is not configured, in the API and in graphs', async () => {
    const refused = await call('/store/items/search', { url: plain.url, token: 'user-a', body: { query: 'cat' } });
    expect(refused.status).toBe(422);
    expect(refused.body!.detail).toEqual([expect.objectContaining({ loc: ['body', 'query'], msg: expect.stringMatching(/store\.index/) })]);
    const fields = await call('/store/items', {
      method: 'PUT',
      url: plain.url,
      token: 'user-a',
      body: { namespace: ['a'], key: 'k', value: {}, index: ['text'] },
    });
    expect(fields.status).toBe(422);
    await expect(graph({ op: 'search', namespace: ['x'], query: 'cat' }, as('user-a'))).rejects.toThrow(/Semantic search is not configured/);
  });

  it('stops the server at startup when the embeddings cannot be loaded, and refuses bad vectors', async () => {
    await expect(start(fixture('langgraph.provider.json'), { schema: 'agent_provider' })).rejects.toThrow(
      /needs @langchain\/openai, which the project does not install/,
    );
    const bad = await start(fixture('langgraph.bad-embed.json'), { schema: 'agent_bad', workers: 0 });
    try {
      const res = await call('/store/items', { method: 'PUT', url: bad.url, body: { namespace: ['a'], key: 'k', value: { text: 'x' } } });
      expect(res.status).toBe(500);
      expect((await call('/store/items?namespace=a&key=k', { url: bad.url })).body).toBeNull();
    } finally {
      await bad.close();
    }
  });
});

describe('TTL', () => {
  // A store on a clock the test moves, in a schema of its own that no server sweeps.
  let ttlPool: pg.Pool;
  beforeAll(async () => {
    const directory = fileURLToPath(new URL('../migrations', import.meta.url));
    await migrate({ connectionString: db.url, schema: 'agent_ttl', directory, log: silentLogger() });
    ttlPool = createPool({ connectionString: db.url, schema: 'agent_ttl', max: 2 });
  });
  beforeEach(async () => {
    await ttlPool.query('DELETE FROM store_items');
  });
  afterAll(async () => {
    await ttlPool?.end();
  });
  const page = { limit: 10, offset: 0 };

  it('keeps an item until the instant its TTL ends, then hides it from get, search and namespaces without deleting it', async () => {
    const clock = new ManualClock();
    const store = new PostgresStore(ttlPool, { clock });
    await store.putItem({ namespace: ['ttl', 'a'], key: 'short', value: { v: 1 }, ttl: 1 });
    await store.putItem({ namespace: ['ttl', 'b'], key: 'forever', value: { v: 2 }, ttl: null });
    await clock.advance(59_999);
    expect((await store.getItem(['ttl', 'a'], 'short', { refreshTtl: false }))?.value).toEqual({ v: 1 });
    await clock.advance(1);
    expect(await store.getItem(['ttl', 'a'], 'short')).toBeUndefined();
    expect((await store.searchItems({ namespacePrefix: ['ttl'], ...page })).map((i) => i.key)).toEqual(['forever']);
    expect(await store.namespaces({ conditions: [], ...page })).toEqual([['ttl', 'b']]);
    expect(await rowCount('agent_ttl', 'short')).toBe(1);
    // Putting again after expiry makes a new item.
    await store.putItem({ namespace: ['ttl', 'a'], key: 'short', value: { v: 3 } });
    expect((await store.getItem(['ttl', 'a'], 'short'))?.value).toEqual({ v: 3 });
  });

  it('sweeps an expired item on the first pass after its expiry, not before', async () => {
    const clock = new ManualClock();
    const store = new PostgresStore(ttlPool, { clock });
    await store.putItem({ namespace: ['ttl'], key: 'swept', value: { v: 1 }, ttl: 1.5 });
    // The real store's sweep, recording what each pass deleted and waking the test when one ends.
    const passes: number[] = [];
    let passed = () => undefined as void;
    const nextPass = () => new Promise<void>((resolve) => (passed = resolve));
    const watched = {
      sweepExpired: async () => {
        const deleted = await store.sweepExpired();
        passes.push(deleted);
        passed();
        return deleted;
      },
    };
    const sweeper = new StoreSweeper(watched, 60_000, silentLogger(), clock);
    sweeper.start();
    try {
      let pass = nextPass();
      await clock.advance(60_000);
      await pass;
      expect(passes).toEqual([0]);
      expect(await rowCount('agent_ttl', 'swept')).toBe(1);
      pass = nextPass();
      await clock.advance(60_000);
      await pass;
      expect(passes).toEqual([0, 1]);
      expect(await rowCount('agent_ttl', 'swept')).toBe(0);
    } finally {
      await sweeper.close();
    }
    await clock.advance(600_000);
    expect(passes).toHaveLength(2);
  });

  it('restarts the TTL on reads unless refresh_ttl is false', async () => {
    const clock = new ManualClock();
    const store = new PostgresStore(ttlPool, { clock });
    await store.putItem({ namespace: ['ttl'], key: 'refreshed', value: { v: 1 }, ttl: 1 });
    await clock.advance(45_000);
    expect(await store.getItem(['ttl'], 'refreshed', { refreshTtl: true })).toBeDefined(); // now until 105 s
    await clock.advance(45_000);
    // Past the first expiry, alive thanks to the refresh; a search without refresh leaves it be.
    expect((await store.searchItems({ namespacePrefix: ['ttl'], filter: { v: 1 }, refreshTtl: false, ...page })).map((i) => i.key)).toEqual(['refreshed']);
    await clock.advance(14_999);
    expect(await store.getItem(['ttl'], 'refreshed', { refreshTtl: false })).toBeDefined();
    await clock.advance(1);
    expect(await store.getItem(['ttl'], 'refreshed')).toBeUndefined();
  });

  it('over HTTP: hides an expired item, refreshes only when asked, and the server sweeps', async () => {
    const mine = as('user-a');
    await mine.store.putItem(['ttl'], 'short', { v: 1 }, { ttl: 1 });
    await mine.store.putItem(['ttl'], 'forever', { v: 2 }, { ttl: null });
    await clock.advance(59_999);
    expect((await mine.store.getItem(['ttl'], 'short', { refreshTtl: false }))?.value).toEqual({ v: 1 });
    await clock.advance(1);
    expect(await mine.store.getItem(['ttl'], 'short')).toBeNull();
    expect((await mine.store.searchItems(['ttl'])).items.map((i) => i.key)).toEqual(['forever']);
    // The handler moved everything under the caller's identity.
    expect((await mine.store.listNamespaces({ prefix: ['ttl'] })).namespaces).toEqual([['user-a', 'ttl']]);

    // refresh_ttl reaches the store: a read without it leaves the expiry, a read with it moves it on.
    const expiry = async () =>
      (await sql.query<{ at: number }>(`SELECT extract(epoch FROM expires_at)::float8 AS at FROM agent.store_items WHERE key = 'refreshed'`)).rows[0]!.at;
    await client.store.putItem(['ttl'], 'refreshed', { v: 1 }, { ttl: 60 });
    const first = await expiry();
    await clock.advance(1_000);
    await client.store.getItem(['ttl'], 'refreshed', { refreshTtl: false });
    expect(await expiry()).toBe(first);
    await client.store.getItem(['ttl'], 'refreshed', { refreshTtl: true });
    expect(await expiry()).toBeCloseTo(first + 1, 3);

    // This server sweeps every 10 s of its clock: the first pass after the expiry deletes the row.
    await client.store.putItem(['ttl'], 'short', { v: 1 }, { ttl: 1 });
    await clock.advance(50_000);
    expect(await rowCount('agent', 'short')).toBe(1);
    // A pass that falls due while the last one still runs is skipped: time moves on until one deletes it.
    await until('a sweep to delete the item', async () => (await clock.advance(10_000), (await rowCount('agent', 'short')) === 0 ? true : undefined));
    // Putting again after expiry makes a new item.
    await client.store.putItem(['ttl'], 'short', { v: 3 });
    expect((await client.store.getItem(['ttl'], 'short'))!.value).toEqual({ v: 3 });
  });
});

describe('graphs and the API share the store', () => {
  it('reads over HTTP what a graph wrote, and a graph reads what the API wrote', async () => {
    expect(await graph({ op: 'put', namespace: ['memories', 'ann'], key: 'm1', value: { text: 'likes music', n: 1 } })).toBe('stored');
    expect((await client.store.getItem(['memories', 'ann'], 'm1'))!.value).toEqual({ text: 'likes music', n: 1 });
    expect((await client.store.searchItems(['memories'], { query: 'music' })).items[0]).toMatchObject({ key: 'm1' });

    await client.store.putItem(['memories', 'bob'], 'm2', { text: 'has a dog' });
    expect(await graph({ op: 'get', namespace: ['memories', 'bob'], key: 'm2' })).toEqual({
      key: 'm2',
      namespace: ['memories', 'bob'],
      value: { text: 'has a dog' },
    });
    expect(await graph({ op: 'get', namespace: ['memories', 'bob'], key: 'nope' })).toBeNull();
    const filtered = (await graph({ op: 'search', namespace: ['memories'], filter: { n: { $gte: 1 } } })) as { key: string }[];
    expect(filtered.map((i) => i.key)).toEqual(['m1']);
  });

  it('answers BaseStore batches mixing every operation, in order', async () => {
    // LangGraph JS wraps a graph's store in AsyncBatchedStore, whose listNamespaces throws
    // (upstream); the store itself answers ListNamespaces operations, as graph code would send them.
    const pool = createPool({ connectionString: db.url, schema: 'agent', max: 2 });
    try {
      const store = new PostgresStore(pool);
      const [put, got, found, spaces, missing] = await store.batch([
        { namespace: ['memories', 'cy'], key: 'm3', value: { n: 3 }, index: false },
        { namespace: ['memories', 'cy'], key: 'm3' },
        { namespacePrefix: ['memories'], filter: { n: { $gt: 2 } }, limit: 5, offset: 0 },
        { matchConditions: [{ matchType: 'prefix', path: ['memories'] }], limit: 10, offset: 0 },
        { namespace: ['memories', 'cy'], key: 'nope' },
      ] as const);
      expect(put).toBeUndefined();
      expect(got).toMatchObject({ namespace: ['memories', 'cy'], key: 'm3', value: { n: 3 } });
      expect(got!.createdAt).toBeInstanceOf(Date);
      expect(found.map((i) => i.key)).toEqual(['m3']);
      expect(spaces).toEqual([
        ['memories', 'ann'],
        ['memories', 'bob'],
        ['memories', 'cy'],
      ]);
      expect(missing).toBeNull();
      expect(await store.listNamespaces({ prefix: ['memories'], maxDepth: 1 })).toEqual([['memories']]);
      await store.delete(['memories', 'cy'], 'm3');
      expect(await store.get(['memories', 'cy'], 'm3')).toBeNull();
    } finally {
      await pool.end();
    }
  });
});

describe('custom auth', () => {
  it('runs store:* handlers, which may move the namespace or refuse', async () => {
    const a = as('user-a');
    const b = as('user-b');
    await a.store.putItem(['notes'], 'n', { who: 'a' });
    await b.store.putItem(['notes'], 'n', { who: 'b' });
    // Each handler put the item under the caller's identity.
    expect((await a.store.getItem(['notes'], 'n'))!).toMatchObject({ namespace: ['user-a', 'notes'], value: { who: 'a' } });
    expect((await b.store.getItem(['notes'], 'n'))!.value).toEqual({ who: 'b' });
    expect((await a.store.searchItems(['notes'])).items.map((i) => i.value)).toEqual([{ who: 'a' }]);
    expect((await b.store.listNamespaces()).namespaces).toEqual([['user-b', 'notes']]);
    await expect(b.store.deleteItem(['notes'], 'n')).rejects.toThrow(/403/);
    await a.store.deleteItem(['notes'], 'n');
    expect(await a.store.getItem(['notes'], 'n')).toBeNull();
    expect((await b.store.getItem(['notes'], 'n'))!.value).toEqual({ who: 'b' });
    expect((await call('/store/items?namespace=notes&key=n', { url: plain.url })).status).toBe(401);
  });
});
