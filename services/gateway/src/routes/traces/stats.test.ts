/**
 * What the console's trace screens need of the trace API, through a real gateway and export-worker
 * on Postgres: project statistics (totals and buckets) that match the runs written, computed here
 * independently; keyset paging with a column choice that returns every run exactly once while runs
 * keep arriving; filter errors that point at the character; another tenant's projects never
 * counted or shown.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { ManualClock } from '@berth/clock';
import { boundCredentialServer, startTraceStack, type TraceStack } from '../../__tests__/trace-stack.js';

type Json = Record<string, any>;

let stack: TraceStack;
let keyA: string;
let keyB: string;

async function call(path: string, init: { method?: string; key?: string; json?: unknown; base?: string } = {}) {
  const res = await fetch(`${init.base ?? stack.gateway.url}${path}`, {
    method: init.method ?? (init.json === undefined ? 'GET' : 'POST'),
    headers: { 'x-api-key': init.key ?? keyA, ...(init.json !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: init.json !== undefined ? JSON.stringify(init.json) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as Json };
}

/** A root run (or a child of `parent`) starting at `start`. */
function run(start: Date, fields: Json = {}, parent?: Json): Json {
  const id = randomUUID();
  const stamp = (d: Date) => d.toISOString().replace(/[-:.]/g, '');
  return {
    id,
    trace_id: parent ? parent.trace_id : id,
    dotted_order: parent ? `${parent.dotted_order}.${stamp(start)}${id}` : `${stamp(start)}${id}`,
    ...(parent ? { parent_run_id: parent.id } : {}),
    name: 'step',
    run_type: 'chain',
    start_time: start.toISOString(),
    inputs: { q: 1 },
    ...fields,
  };
}

async function write(key: string, runs: Json[]): Promise<void> {
  for (let i = 0; i < runs.length; i += 100) {
    const res = await call('/runs/batch', { key, json: { post: runs.slice(i, i + 100) } });
    expect(res.status).toBe(202);
    expect(res.body.refused).toEqual([]);
  }
}

async function projectId(key: string, name: string): Promise<string> {
  const res = await call(`/sessions?name=${encodeURIComponent(name)}`, { key });
  return res.body[0].id;
}

beforeAll(async () => {
  // "Now" for a stats range without an end: three hours after the runs of the stats tests began.
  stack = await startTraceStack('gw_trace_stats', { clock: new ManualClock(new Date('2026-03-01T03:00:00Z')) });
  ({ keyA, keyB } = stack);
});
afterAll(async () => stack?.close());

/** percentile_cont: linear interpolation between the two nearest ranks. */
function percentile(values: number[], p: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((x, y) => x - y);
  const rank = p * (sorted.length - 1);
  const low = Math.floor(rank);
  const high = Math.ceil(rank);
  return sorted[low]! + (sorted[high]! - sorted[low]!) * (rank - low);
}

/** The stats of `runs`, computed from what was written. */
function expected(runs: Json[]): Json {
  const sum = (field: string) => runs.reduce((n, r) => n + (r[field] ?? 0), 0);
  const latencies = runs.filter((r) => r.end_time).map((r) => (Date.parse(r.end_time) - Date.parse(r.start_time)) / 1000);
  const starts = runs.map((r) => Date.parse(r.start_time));
  return {
    run_count: runs.length,
    error_rate: runs.length === 0 ? null : runs.filter((r) => r.error).length / runs.length,
    latency_p50: percentile(latencies, 0.5),
    latency_p99: percentile(latencies, 0.99),
    prompt_tokens: sum('prompt_tokens'),
    completion_tokens: sum('completion_tokens'),
    total_tokens: sum('total_tokens'),
    prompt_cost: sum('prompt_cost'),
    completion_cost: sum('completion_cost'),
    total_cost: sum('total_cost'),
    last_run_start_time: runs.length === 0 ? null : new Date(Math.max(...starts)).toISOString(),
  };
}

function expectStats(actual: Json, want: Json): void {
  const { latency_p50, latency_p99, prompt_cost, completion_cost, total_cost, ...exact } = want;
  expect(actual).toMatchObject(exact);
  for (const [field, value] of Object.entries({ latency_p50, latency_p99, prompt_cost, completion_cost, total_cost })) {
    if (value === null) expect(actual[field]).toBeNull();
    else expect(actual[field]).toBeCloseTo(value as number, 6);
  }
}

describe('project statistics', () => {
  const from = new Date('2026-03-01T00:00:00Z');
  const to = new Date('2026-03-01T03:00:00Z');
  const inRange: Json[] = [];
  let project: string;
  let otherProject: string;
  let outsideBefore: Json;

  beforeAll(async () => {
    // 90 runs over three hours: durations, errors, unfinished runs, tokens and costs that vary.
    for (let i = 0; i < 90; i++) {
      const start = new Date(from.getTime() + ((i * 7919) % 10_800) * 1000 + (i % 1000));
      const llm = i % 3 === 0;
      inRange.push(
        run(start, {
          name: `run-${i}`,
          run_type: llm ? 'llm' : 'chain',
          ...(i % 11 === 5 ? {} : { end_time: new Date(start.getTime() + ((i * 37) % 5000) + 1).toISOString() }),
          ...(i % 7 === 2 ? { error: `failed ${i}` } : {}),
          ...(llm ? { prompt_tokens: 10 + i, completion_tokens: i % 13, total_tokens: 10 + i + (i % 13) } : {}),
          ...(llm ? { prompt_cost: (10 + i) * 0.000001, completion_cost: (i % 13) * 0.000002, total_cost: (10 + i) * 0.000001 + (i % 13) * 0.000002 } : {}),
          session_name: 'stats-project',
        }),
      );
    }
    // Children: counted as runs, left out by is_root.
    inRange.push(
      run(
        new Date(from.getTime() + 1000),
        { name: 'child', end_time: new Date(from.getTime() + 2000).toISOString(), session_name: 'stats-project' },
        inRange[0],
      ),
    );
    // Outside [from, to): the second starts exactly at the end.
    outsideBefore = run(new Date(from.getTime() - 1), { end_time: from.toISOString(), session_name: 'stats-project' });
    const outside = [outsideBefore, run(to, { end_time: new Date(to.getTime() + 60_000).toISOString(), session_name: 'stats-project' })];
    await write(keyA, [...inRange, ...outside]);
    await write(keyA, [run(new Date(from.getTime() + 5000), { end_time: new Date(from.getTime() + 9000).toISOString(), session_name: 'another-project' })]);
    // Tenant B: a project of the same name with runs in the same range, tokens and errors.
    await write(
      keyB,
      Array.from({ length: 20 }, (_, i) =>
        run(new Date(from.getTime() + i * 60_000), {
          error: 'b',
          total_tokens: 1000,
          prompt_tokens: 1000,
          completion_tokens: 0,
          session_name: 'stats-project',
        }),
      ),
    );
    project = await projectId(keyA, 'stats-project');
    otherProject = await projectId(keyA, 'another-project');
  });

  it('totals and buckets match the runs written, and the buckets cover the range', async () => {
    const res = await call('/sessions/stats', {
      json: { session: [project], start_time: from.toISOString(), end_time: to.toISOString(), bucket_seconds: 600 },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ start_time: from.toISOString(), end_time: to.toISOString(), bucket_seconds: 600 });
    const [series] = res.body.projects;
    expect(series.session_id).toBe(project);
    expectStats(series.stats, expected(inRange));
    expect(series.buckets).toHaveLength(18);
    series.buckets.forEach((bucket: Json, index: number) => {
      const bucketStart = from.getTime() + index * 600_000;
      expect(bucket.start_time).toBe(new Date(bucketStart).toISOString());
      expectStats(bucket.stats, expected(inRange.filter((r) => Date.parse(r.start_time) >= bucketStart && Date.parse(r.start_time) < bucketStart + 600_000)));
    });
  });

  it('chooses the bucket size from the range, and narrows by filter and is_root', async () => {
    const res = await call('/sessions/stats', { json: { session: [project, otherProject], start_time: from.toISOString(), end_time: to.toISOString() } });
    expect(res.status).toBe(200);
    // Three hours: 5-minute buckets, the smallest "nice" size giving at most 120.
    expect(res.body.bucket_seconds).toBe(300);
    expect(res.body.projects.map((p: Json) => p.session_id)).toEqual([project, otherProject]);
    expect(res.body.projects[0].buckets).toHaveLength(36);
    expect(res.body.projects[0].buckets.reduce((n: number, b: Json) => n + b.stats.run_count, 0)).toBe(inRange.length);
    expect(res.body.projects[1].stats.run_count).toBe(1);

    const roots = await call('/sessions/stats', { json: { session: [project], start_time: from.toISOString(), end_time: to.toISOString(), is_root: true } });
    expectStats(roots.body.projects[0].stats, expected(inRange.filter((r) => !r.parent_run_id)));
    const llm = await call('/sessions/stats', {
      json: { session: [project], start_time: from.toISOString(), end_time: to.toISOString(), filter: 'eq(run_type, "llm")' },
    });
    expectStats(llm.body.projects[0].stats, expected(inRange.filter((r) => r.run_type === 'llm')));
  });

  it('without a range: the day before now, in 15-minute buckets', async () => {
    const res = await call('/sessions/stats', { json: { session: [project] } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ start_time: '2026-02-28T03:00:00.000Z', end_time: to.toISOString(), bucket_seconds: 900 });
    expect(res.body.projects[0].buckets).toHaveLength(96);
    expectStats(res.body.projects[0].stats, expected([...inRange, outsideBefore]));
  });

  it("LangSmith's include_stats on the projects list and a project, over stats_start_time (and Berth's stats_end_time)", async () => {
    const range = `include_stats=true&stats_start_time=${from.toISOString()}&stats_end_time=${to.toISOString()}`;
    const list = await call(`/sessions?${range}`);
    expect(list.status).toBe(200);
    const listed = list.body.find((s: Json) => s.id === project);
    expectStats(listed, expected(inRange));
    expect(list.body.find((s: Json) => s.id === otherProject).run_count).toBe(1);
    expectStats((await call(`/sessions/${project}?${range}`)).body, expected(inRange));
    // Without a range: every run of the project, as before.
    expect((await call(`/sessions/${project}?include_stats=true`)).body.run_count).toBe(inRange.length + 2);
    expect((await call(`/sessions/${project}`)).body).not.toHaveProperty('run_count');
  });

  it("another tenant's project is never counted nor shown (from the attacker's side)", async () => {
    // Tenant B asks for A's project: not found, as one that does not exist.
    const asked = await call('/sessions/stats', { key: keyB, json: { session: [project], start_time: from.toISOString(), end_time: to.toISOString() } });
    expect(asked.status).toBe(404);
    expect(JSON.stringify(asked.body)).not.toContain('stats-project');
    const mixed = await call('/sessions/stats', { key: keyB, json: { session: [await projectId(keyB, 'stats-project'), project] } });
    expect(mixed.status).toBe(404);
    // B's own project counts only B's runs, and A's counts none of B's.
    const own = await call('/sessions/stats', {
      key: keyB,
      json: { session: [await projectId(keyB, 'stats-project')], start_time: from.toISOString(), end_time: to.toISOString() },
    });
    expect(own.body.projects[0].stats).toMatchObject({ run_count: 20, error_rate: 1, total_tokens: 20_000 });
    const listed = await call(`/sessions?include_stats=true`, { key: keyB });
    expect(listed.body.map((s: Json) => s.id)).not.toContain(project);
    expect((await call(`/sessions/${project}?include_stats=true`, { key: keyB })).status).toBe(404);
  });

  it("a deployment's tracing credential gets the stats of its own project only", async () => {
    const server = await boundCredentialServer(stack, { id: otherProject, name: 'another-project' });
    try {
      const range = { start_time: from.toISOString(), end_time: to.toISOString() };
      expect((await call('/sessions/stats', { base: server.url, json: { session: [otherProject], ...range } })).body.projects[0].stats.run_count).toBe(1);
      expect((await call('/sessions/stats', { base: server.url, json: { session: [otherProject, project], ...range } })).status).toBe(403);
      expect((await call('/sessions/stats', { base: server.url, json: { session: [project], ...range } })).status).toBe(403);
    } finally {
      await server.close();
    }
  });

  it('bad input is a 422 naming the field, never a 500', async () => {
    const bad: [Json, (string | number)[]][] = [
      [{ session: [] }, ['body', 'session']],
      [{ session: ['not-a-uuid'] }, ['body', 'session', 0]],
      [{ session: [project], surprise: 1 }, ['body', 'surprise']],
      [{ session: [project], start_time: to.toISOString(), end_time: from.toISOString() }, ['body', 'end_time']],
      [{ session: [project], start_time: from.toISOString(), end_time: to.toISOString(), bucket_seconds: 1 }, ['body', 'bucket_seconds']],
      [{ session: [project], bucket_seconds: 0 }, ['body', 'bucket_seconds']],
      [{ session: [project], start_time: 'yesterday' }, ['body', 'start_time']],
      [{ session: [project], start_time: '0001-01-01', end_time: '9999-12-31' }, ['body', 'start_time']],
      [{ session: [project], bucket_seconds: 2 ** 31 }, ['body', 'bucket_seconds']],
      [{ session: [project], filter: 'eq(latency, "fast")' }, ['body', 'filter']],
    ];
    for (const [json, loc] of bad) {
      const res = await call('/sessions/stats', { json });
      expect({ json, status: res.status }).toEqual({ json, status: 422 });
      expect(res.body.detail.map((d: Json) => d.loc)).toContainEqual(loc);
    }
    expect((await call('/sessions?include_stats=true&stats_start_time=soon')).status).toBe(422);
  });
});

describe('the runs table', () => {
  it('pages a project with a cursor and chosen columns: every run exactly once while runs keep arriving', async () => {
    const base = Date.now() - 3_600_000;
    const original = Array.from({ length: 250 }, (_, i) => run(new Date(base + i * 1000), { name: `paged-${i}`, session_name: 'table' }));
    await write(keyA, original);
    const session = await projectId(keyA, 'table');
    const seen: string[] = [];
    const added: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res = await call('/runs/query', {
        json: { session: [session], limit: 40, select: ['name', 'start_time', 'no_such_field'], ...(cursor ? { cursor } : {}) },
      });
      expect(res.status).toBe(200);
      for (const r of res.body.runs) expect(Object.keys(r).sort()).toEqual(['id', 'name', 'start_time']);
      seen.push(...res.body.runs.map((r: Json) => r.id));
      cursor = res.body.cursors.next;
      pages++;
      // Between pages: a run newer than all (above the cursor), one older than all, and one
      // starting at the same instant as the page's last run (the id breaks the tie).
      const last = res.body.runs.at(-1);
      const more: Json[] = [run(new Date()), run(new Date(base - pages * 1000)), run(new Date(last.start_time))].map((r) => ({ ...r, session_name: 'table' }));
      added.push(...more.map((r) => r.id));
      await write(keyA, more);
    } while (cursor);
    expect(pages).toBeGreaterThanOrEqual(7);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toEqual(expect.arrayContaining(original.map((r) => r.id)));
    expect(seen.filter((id) => !added.includes(id)).length).toBe(original.length);
  });
});

describe('the filter language', () => {
  it('a bad filter is a 422 whose detail names the field and the character offset', async () => {
    const text = 'and(eq(run_type, "llm"), gt(latency, "fast"))';
    const res = await call('/runs/query', { json: { filter: text } });
    expect(res.status).toBe(422);
    expect(res.body.detail).toEqual([
      {
        loc: ['body', 'filter'],
        msg: expect.stringContaining(`at position ${text.indexOf('"fast"')}`),
        type: 'value_error.filter',
        ctx: { position: text.indexOf('"fast"'), expected: expect.stringContaining('duration'), found: 'the string "fast"' },
      },
    ]);
    const tree = await call('/runs/query', { json: { tree_filter: 'has(name, "x")' } });
    expect(tree.body.detail[0]).toMatchObject({ loc: ['body', 'tree_filter'], ctx: { position: 4 } });
  });

  it('validates filters without running a query, for checking as the user types', async () => {
    const ok = await call('/runs/filter/validate', { json: { filter: 'and(eq(run_type, "llm"), has(tags, "prod"))', trace_filter: 'eq(name, "agent")' } });
    expect(ok).toEqual({ status: 200, body: { valid: true } });
    // Each prefix of a filter being typed: the offset is where the text stops making sense.
    const typed = 'eq(name, "agent")';
    for (const [prefix, position] of [
      ['eq', 2],
      ['eq(', 3],
      ['eq(name', 7],
      ['eq(name, ', 9],
      ['eq(name, "ag', 9],
      ['eq(name, "agent"', 16],
    ] as const) {
      expect(typed.startsWith(prefix)).toBe(true);
      const res = await call('/runs/filter/validate', { json: { filter: prefix } });
      expect({ prefix, status: res.status, loc: res.body.detail?.[0]?.loc, position: res.body.detail?.[0]?.ctx?.position }).toEqual({
        prefix,
        status: 422,
        loc: ['body', 'filter'],
        position,
      });
    }
    const trace = await call('/runs/filter/validate', { json: { trace_filter: 'eq(nmae, "x")' } });
    expect(trace.body.detail[0]).toMatchObject({ loc: ['body', 'trace_filter'], ctx: { position: 3 } });
    expect((await call('/runs/filter/validate', { json: { filter: 1 } })).status).toBe(422);
    expect((await call('/runs/filter/validate', { json: { filters: 'eq(name, "x")' } })).status).toBe(422);
    expect((await call('/runs/filter/validate', { json: { filter: 'x'.repeat(30_000) } })).status).toBe(422);
  });
});
