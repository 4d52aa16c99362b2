#!/usr/bin/env node
/**
 * bench/console trace: how long the console takes to show a trace of N runs (default 5,000; issue
 * 27's target ≤ 1 s), from navigation to the tree and the waterfall on screen with every run
 * loaded, in Chromium (Debian's, driven by playwright-core as @berth/testing's launchChromium does).
 * Starts a fresh Postgres, the export-worker and the gateway as processes of their own, writes one
 * agent-shaped trace through the ingest API (`POST /runs/batch`: a root, steps of model call and
 * tool calls, a few KB each), signs in once, then opens the trace page again and again (the first
 * time with an empty cache) and measures in the page: the time to shown, the API calls it made,
 * the rows in the DOM, and the frames while the tree is scrolled from top to bottom.
 * Writes its figures to docs/benchmarks.md (section bench:console-trace).
 *
 * Usage (after `make build`): node bench/console/trace.mjs [--runs 5000] [--repeat 10] [--no-write] [--keep-logs]
 */
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import { launchChromium } from '@berth/testing';
import { writeSection } from '../doc-section.mjs';
import { ROOT, startConsoleStack } from './seed.mjs';

const BEGIN = '<!-- bench:console-trace:begin -->';
const END = '<!-- bench:console-trace:end -->';
const STEP_RUNS = 5; // a step: its chain, the model call, the tools chain and two tool calls

const { values: opts } = parseArgs({
  options: {
    runs: { type: 'string', default: '5000' },
    repeat: { type: 'string', default: '10' },
    'no-write': { type: 'boolean', default: false },
    'keep-logs': { type: 'boolean', default: false },
  },
});
const RUNS = Number(opts.runs);
const REPEAT = Number(opts.repeat);
for (const [name, value] of Object.entries({ runs: RUNS, repeat: REPEAT })) {
  if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} takes a positive integer`);
}

const log = (line) => console.log(line);
const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];

/** One trace of `count` runs as an agent writes it: a root, then steps (chain → model, tools → tool, tool), in time order. */
function agentTrace(count) {
  const base = Date.parse('2026-03-01T12:00:00Z');
  const runs = [];
  let clock = 0;
  const add = (parent, name, run_type, ms, fields = {}) => {
    const id = randomUUID();
    const start = new Date(base + clock);
    const stamp = `${start.toISOString().replace(/[-:]/g, '').replace('.', '').replace('Z', '')}000Z${id}`;
    const run = {
      id,
      trace_id: parent?.trace_id ?? id,
      parent_run_id: parent?.id,
      dotted_order: parent ? `${parent.dotted_order}.${stamp}` : stamp,
      name,
      run_type,
      start_time: start.toISOString(),
      end_time: new Date(base + clock + ms).toISOString(),
      session_name: 'bench-console-trace',
      inputs: { messages: [{ role: 'user', content: `question ${runs.length}: ${'context '.repeat(40)}` }] },
      outputs: { content: `answer ${runs.length}: ${'words '.repeat(60)}` },
      ...fields,
    };
    runs.push(run);
    clock += 1;
    return run;
  };
  const root = add(undefined, 'agent', 'chain', 0, { extra: { metadata: { thread_id: 'bench-thread' } } });
  while (runs.length + STEP_RUNS <= count) {
    const step = add(root, 'agent-step', 'chain', 40);
    add(step, 'model', 'llm', 25, { prompt_tokens: 900, completion_tokens: 120, total_tokens: 1020 });
    const tools = add(step, 'tools', 'chain', 12);
    add(tools, 'search', 'tool', 6);
    add(tools, 'calculator', 'tool', 4, (runs.length / STEP_RUNS) % 50 === 0 ? { error: 'ZeroDivisionError: division by zero' } : {});
    clock += 10;
  }
  while (runs.length < count) add(root, 'note', 'tool', 1);
  root.end_time = new Date(base + clock).toISOString();
  return runs;
}

async function measure(url, key) {
  const browser = await launchChromium();
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    page.setDefaultTimeout(60_000);
    const foreign = [];
    page.on('request', (request) => {
      if (new URL(request.url()).origin !== new URL(url).origin) foreign.push(request.url());
    });
    await page.goto(`${url}/sign-in`);
    await page.fill('#api_key', key);
    await page.click('button[type=submit]');
    await page.waitForURL((u) => u.pathname !== '/sign-in');

    const roots = await (
      await fetch(`${url}/runs/query`, {
        method: 'POST',
        headers: { 'x-api-key': key, 'content-type': 'application/json' },
        body: JSON.stringify({ is_root: true, select: ['session_id'] }),
      })
    ).json();
    const { id: traceId, session_id: projectId } = roots.runs[0];
    const target = `${url}/traces/${projectId}/${traceId}`;
    const expected = `${RUNS.toLocaleString('en')} runs`;
    // Shown: the summary counts every run, and the tree's rows and the waterfall's bars are painted.
    const shown = (text) => {
      const summary = document.querySelector('[data-testid=trace-summary]');
      if (!summary || !summary.textContent.startsWith(text)) return false;
      if (!document.querySelector('[role=treeitem] [data-testid=bar]')) return false;
      return performance.now();
    };
    const open = async (fresh) => {
      if (fresh) {
        // The HTTP cache only: the session cookie stays.
        const session = await context.newCDPSession(page);
        await session.send('Network.clearBrowserCache');
        await session.detach();
      }
      await page.goto(target);
      const firstRows = await (await page.waitForFunction(() => document.querySelector('[role=treeitem] [data-testid=bar]') && performance.now(), undefined, { polling: 'raf' })).jsonValue();
      const ms = await (await page.waitForFunction(shown, expected, { polling: 'raf' })).jsonValue();
      // Where the time went: the app starting (to its first runs query), the queries, the tree built and painted.
      const [calls, firstCall, lastAnswer] = await page.evaluate(() => {
        const queries = performance.getEntriesByType('resource').filter((e) => e.name.endsWith('/runs/query'));
        return [queries.length, Math.min(...queries.map((e) => e.startTime)), Math.max(...queries.map((e) => e.responseEnd))];
      });
      return { ms, firstRows, calls, firstCall, lastAnswer };
    };

    const cold = await open(true).catch(async (error) => {
      throw new Error(`${error.message}\n${await page.content().then((html) => html.slice(0, 2000))}`);
    });
    const phases = (o) => `first rows ${o.firstRows.toFixed(0)} ms, app start ${o.firstCall.toFixed(0)} ms, queries ${(o.lastAnswer - o.firstCall).toFixed(0)} ms, tree ${(o.ms - o.lastAnswer).toFixed(0)} ms`;
    log(`  first open (empty cache): ${cold.ms.toFixed(0)} ms (${phases(cold)}), ${cold.calls} runs queries`);
    const samples = [];
    for (let i = 0; i < REPEAT; i++) samples.push(await open(false));
    samples.sort((a, b) => a.ms - b.ms);
    const warm = { median: quantile(samples, 0.5), max: samples.at(-1) };
    log(`  reopened, the median one: ${phases(warm.median)}`);
    log(`  reopened ${REPEAT} times: median ${warm.median.ms.toFixed(0)} ms, max ${warm.max.ms.toFixed(0)} ms`);

    const rowsInDom = await page.evaluate(`document.querySelectorAll('[role=treeitem]').length`);
    const heapMiB = await page.evaluate(`performance.memory ? performance.memory.usedJSHeapSize / 2 ** 20 : null`);
    // Scrolling: the tree is moved a screen a frame from top to bottom; the frames' intervals are kept.
    const frames = await page.evaluate(`new Promise((done) => {
      const tree = document.querySelector('[role=tree]');
      const intervals = [];
      let last = performance.now();
      const step = () => {
        const now = performance.now();
        intervals.push(now - last);
        last = now;
        if (tree.scrollTop + tree.clientHeight >= tree.scrollHeight) return done(intervals);
        tree.scrollTop += tree.clientHeight;
        requestAnimationFrame(step);
      };
      requestAnimationFrame(step);
    })`);
    const sortedFrames = frames.slice(1).sort((a, b) => a - b);
    const scroll = { frames: sortedFrames.length, median: quantile(sortedFrames, 0.5), p99: quantile(sortedFrames, 0.99), max: sortedFrames.at(-1) };
    log(`  scrolled in ${scroll.frames} frames: median ${scroll.median.toFixed(1)} ms, max ${scroll.max.toFixed(1)} ms; ${rowsInDom} rows in the DOM`);
    if (foreign.length) throw new Error(`requests to another host: ${foreign.join(', ')}`);
    return { cold, warm, rowsInDom, heapMiB, scroll, chromium: browser.version() };
  } finally {
    await browser.close();
  }
}

const stack = await startConsoleStack({ log });
try {
  const { url, key } = stack;
  log(`writing a trace of ${RUNS} runs through POST /runs/batch…`);
  const runs = agentTrace(RUNS);
  for (let i = 0; i < runs.length; i += 500) {
    const res = await fetch(`${url}/runs/batch`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ post: runs.slice(i, i + 500) }),
    });
    const body = await res.json();
    if (res.status !== 202 || body.refused.length) throw new Error(`ingest: ${res.status} ${JSON.stringify(body).slice(0, 500)}`);
  }
  // The API alone, from Node: every page of the trace one after another, as a script would read it.
  const paging = [];
  for (let i = 0; i < 3; i++) {
    const started = performance.now();
    let cursor = null;
    let pages = 0;
    do {
      const res = await fetch(`${url}/runs/query`, {
        method: 'POST',
        headers: { 'x-api-key': key, 'content-type': 'application/json' },
        body: JSON.stringify({ trace: runs[0].id, select: ['name', 'run_type', 'status', 'start_time', 'end_time', 'parent_run_id'], order: 'asc', limit: 100, ...(cursor ? { cursor } : {}) }),
      });
      cursor = (await res.json()).cursors.next;
      pages++;
    } while (cursor);
    paging.push({ ms: performance.now() - started, pages });
  }
  paging.sort((a, b) => a.ms - b.ms);
  const api = paging[1];
  log(`  the API alone: ${api.pages} pages one after another in ${api.ms.toFixed(0)} ms (median of 3)`);
  log('opening the trace page in Chromium…');
  const result = { ...(await measure(url, key)), api, load: os.loadavg()[0] };
  const section = render(result);
  console.log(`\n${section}`);
  if (!opts['no-write']) {
    writeSection(`${BEGIN}\n${section}\n${END}`, BEGIN, END);
    log('wrote docs/benchmarks.md');
  }
} finally {
  await stack.stop({ keep: opts['keep-logs'] });
}

function render({ cold, warm, rowsInDom, heapMiB, scroll, chromium, api, load }) {
  const revision = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).stdout.trim();
  const cpus = os.cpus();
  const ms = (value) => value.toFixed(0);
  const phase = (o) => `${ms(o.firstCall)} / ${ms(o.lastAnswer - o.firstCall)} / ${ms(o.ms - o.lastAnswer)} ms`;
  return `## Console: a trace of ${RUNS.toLocaleString('en-US')} runs (\`bench/console/trace.mjs\`)

**Data:** one agent-shaped trace of ${RUNS.toLocaleString('en-US')} runs written through \`POST /runs/batch\` (a root; steps of a chain, a model
call, a tools chain and two tool calls, 5 levels deep; inputs and outputs of about 0.5 KB), on a fresh Postgres (fast mode), the
gateway and the export-worker as processes of their own. Chromium ${chromium} (Debian's, headless, 1280×800), signed in once.

**Measured in the page:** from navigation start to the tree's rows and the waterfall's bars painted with every run loaded
(\`performance.now()\` when the summary says ${RUNS.toLocaleString('en-US')} runs and a bar is in a row, polled every frame); the page
shows the first 100 runs (a tree of their own: a parent starts before its children) as soon as they come, before the rest.
The page makes ${cold.calls} \`POST /runs/query\` calls: a first page and the last run, then the rest of the trace in 6 windows of start time paged side by side (100 runs a page, 6 fields each), and the root's metadata.

**Machine:** ${cpus.length} CPUs (${cpus[0]?.model ?? 'unknown'}), ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, Node ${process.version}, load average ${load.toFixed(1)} when measured (the machine is shared). **Revision:** ${revision}.

**Command:** \`node bench/console/trace.mjs --runs ${RUNS} --repeat ${REPEAT}\` after \`make build\`, run ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')}.

| what | figure | target |
|---|---:|---:|
| first runs shown (the first page of 100), first open / opened again, median | ${ms(cold.firstRows)} / ${ms(warm.median.firstRows)} ms | |
| trace shown, first open (empty HTTP cache) | ${ms(cold.ms)} ms | ≤ 1,000 ms |
| … of which: the app starting (navigation to its first runs query) / the runs queries / the tree built and painted | ${phase(cold)} | |
| trace shown, opened again (${REPEAT} times), median | ${ms(warm.median.ms)} ms | ≤ 1,000 ms |
| … of which (the median open) | ${phase(warm.median)} | |
| trace shown, opened again, slowest | ${ms(warm.max.ms)} ms | |
| the API alone from Node: every page of the trace one after another (${api.pages} pages, median of 3) | ${ms(api.ms)} ms | |
| tree rows in the DOM (of ${RUNS.toLocaleString('en-US')}) | ${rowsInDom} | |
| JS heap after the page is shown | ${heapMiB === null ? 'n/a' : `${heapMiB.toFixed(1)} MiB`} | |
| scrolling the tree top to bottom, a screen a frame: frames | ${scroll.frames} | |
| frame interval while scrolling, median / p99 / max | ${scroll.median.toFixed(1)} / ${scroll.p99.toFixed(1)} / ${scroll.max.toFixed(1)} ms | |`;
}
