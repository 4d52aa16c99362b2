#!/usr/bin/env node
/**
 * bench/console: the web console in Chromium (Debian's, driven by playwright-core) against the
 * gateway and export-worker as processes of their own on a fresh Postgres:
 * - first load: the JS and CSS the sign-in page transfers, gzipped (issue target ≤ 300 KB);
 * - a project of N runs (default 100,000; bench/console/seed.mjs loads them straight into the
 *   store): time to the first page of rows shown, opening `/traces/{project_id}` from scratch and
 *   from the projects page (target ≤ 500 ms); then scrolling through every run (the table pages
 *   with the cursor as its end comes into view), the frame intervals while scrolling, and the JS
 *   heap and DOM size afterwards (CDP `Performance.getMetrics` after a garbage collection).
 * Writes its figures to docs/benchmarks.md (section bench:console).
 *
 * Usage (after `make build`): node bench/console/run.mjs [--runs 100000] [--repeat 10] [--no-write] [--keep-logs]
 */
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { launchChromium } from '@berth/testing';
import { writeSection } from '../doc-section.mjs';
import { ROOT, seedProject, startConsoleStack } from './seed.mjs';

const BEGIN = '<!-- bench:console:begin -->';
const END = '<!-- bench:console:end -->';

const { values: opts } = parseArgs({
  options: {
    runs: { type: 'string', default: '100000' },
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
const summary = (samples) => {
  const sorted = [...samples].sort((a, b) => a - b);
  return { median: quantile(sorted, 0.5), p99: quantile(sorted, 0.99), max: sorted.at(-1) };
};
const FIRST_ROW = 'tr[data-index="0"]';

/** The JS and CSS (and fonts) the sign-in page transfers on a first visit, gzip as served. */
async function firstLoad(browser, url) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  const responses = [];
  page.on('response', (response) => responses.push(response));
  await page.goto(`${url}/sign-in`, { waitUntil: 'networkidle' });
  await page.waitForSelector('h1:text("Sign in to Berth")');
  const bytes = { script: 0, stylesheet: 0, font: 0, document: 0 };
  for (const response of responses) {
    const type = response.request().resourceType();
    if (type in bytes) bytes[type] += (await response.request().sizes()).responseBodySize;
  }
  await context.close();
  return bytes;
}

/** A signed-in tab. */
async function signedIn(browser, url, key) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  page.setDefaultTimeout(60_000);
  await page.goto(`${url}/sign-in`);
  await page.fill('#api_key', key);
  await page.click('button[type=submit]');
  await page.waitForSelector('h1:text("Deployments")');
  return { context, page };
}

/** ms from `action` to the first row of the runs table in the page. */
async function toFirstRow(page, action) {
  const started = performance.now();
  await action();
  await page.waitForSelector(FIRST_ROW);
  return performance.now() - started;
}

async function metrics(cdp) {
  await cdp.send('HeapProfiler.collectGarbage');
  const { metrics: list } = await cdp.send('Performance.getMetrics');
  const of = (name) => list.find((m) => m.name === name)?.value;
  return { heapMiB: of('JSHeapUsedSize') / 2 ** 20, nodes: of('Nodes') };
}

/** Frame intervals (ms) while the table scrolls by `step` px each animation frame, `frames` times. */
const SCROLL_FRAMES = (step, frames) => `new Promise((resolve) => {
  const el = document.querySelector('[data-testid=runs-scroller]');
  const times = [];
  let last = performance.now();
  const tick = (now) => {
    times.push(now - last);
    last = now;
    el.scrollTop += ${step};
    if (times.length < ${frames}) requestAnimationFrame(tick);
    else resolve(times.slice(1));
  };
  requestAnimationFrame(tick);
})`;

async function main(stack, project) {
  const browser = await launchChromium();
  try {
    log('first load of the console…');
    const load = await firstLoad(browser, stack.url);
    log(`  JS ${load.script} B, CSS ${load.stylesheet} B, fonts ${load.font} B (transferred)`);

    const { context, page } = await signedIn(browser, stack.url, stack.key);
    const runsUrl = `${stack.url}/traces/${project}`;
    log(`time to the first page of rows of the ${RUNS}-run project…`);
    await toFirstRow(page, () => page.goto(runsUrl)); // warm-up: assets in the HTTP cache, as for a returning user
    const direct = [];
    for (let i = 0; i < REPEAT; i++) direct.push(await toFirstRow(page, () => page.goto(runsUrl)));
    const fromList = [];
    for (let i = 0; i < REPEAT; i++) {
      await page.goto(`${stack.url}/traces`);
      await page.waitForSelector('a:text-is("big")');
      fromList.push(await toFirstRow(page, () => page.click('a:text-is("big")')));
    }
    const first = { direct: summary(direct), fromList: summary(fromList) };
    log(`  opening the URL: median ${first.direct.median.toFixed(0)} ms; from the projects page: median ${first.fromList.median.toFixed(0)} ms`);

    const cdp = await context.newCDPSession(page);
    await cdp.send('Performance.enable');
    await page.goto(runsUrl);
    await page.waitForSelector(FIRST_ROW);
    const atFirstPage = await metrics(cdp);

    log(`scrolling through the ${RUNS} runs…`);
    const scroller = page.getByTestId('runs-scroller');
    const loaded = page.getByTestId('loaded');
    const done = `${RUNS.toLocaleString('en-US')} runs loaded`;
    const started = performance.now();
    let text = await loaded.textContent();
    while (text !== done) {
      await scroller.evaluate((el) => el.scrollTo(0, el.scrollHeight));
      await page.locator(`[data-testid=loaded]:not(:text-is("${text}"))`).waitFor();
      text = await loaded.textContent();
    }
    const scrollSeconds = (performance.now() - started) / 1000;
    await scroller.evaluate((el) => el.scrollTo(0, el.scrollHeight));
    await page.waitForSelector(`tr[data-index="${RUNS - 1}"]`);
    log(`  all loaded in ${scrollSeconds.toFixed(1)} s`);
    const afterAll = await metrics(cdp);
    await scroller.evaluate((el) => el.scrollTo(0, 0));
    const frames = summary(await page.evaluate(SCROLL_FRAMES(2000, 300)));
    const rowsPerFrame = Math.round(2000 / 36);
    log(`  frames while scrolling ${rowsPerFrame} rows a frame: median ${frames.median.toFixed(1)} ms, p99 ${frames.p99.toFixed(1)} ms`);
    log(`  JS heap ${atFirstPage.heapMiB.toFixed(1)} MiB at the first page, ${afterAll.heapMiB.toFixed(1)} MiB with every run loaded; DOM nodes ${atFirstPage.nodes} → ${afterAll.nodes}`);
    await context.close();
    return { load, first, scrollSeconds, atFirstPage, afterAll, frames, rowsPerFrame, load1: os.loadavg()[0] };
  } finally {
    await browser.close();
  }
}

function render(result) {
  const { load, first, scrollSeconds, atFirstPage, afterAll, frames, rowsPerFrame } = result;
  const revision = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).stdout.trim();
  const cpus = os.cpus();
  const chromium = spawnSync('chromium', ['--version'], { encoding: 'utf8' }).stdout?.trim() || 'chromium';
  const kb = (bytes) => (bytes / 1000).toFixed(1);
  const ms = (value) => value.toFixed(0);
  const n = RUNS.toLocaleString('en-US');
  return `${BEGIN}
## Console: first load, and a project of ${n} runs in the browser (\`bench/console/run.mjs\`)

**Setup:** the gateway and the export-worker as processes of their own (their \`dist/\`, the console's build served
by the gateway) on a fresh Postgres (fast mode); a project of ${n} LLM runs over 7 days loaded straight into the
trace store (\`bench/console/seed.mjs\`, the rows of \`bench/export/load-runs.mjs\`). ${chromium}, headless, 1280×800, driven by
\`playwright-core\` on the same machine. The runs table asks for its default columns (name, status, start, latency,
tokens, cost), root runs, 100 a page.

**Machine:** ${cpus.length} CPUs (${cpus[0]?.model ?? 'unknown'}), ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, Node ${process.version}; load average ${result.load1.toFixed(1)} (1 min) at the end, shared with other work. **Revision:** ${revision}.

**Command:** \`node bench/console/run.mjs --runs ${RUNS} --repeat ${REPEAT}\` (after \`make build\`), run ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')}.

| measure | figure | target |
|---|---:|---:|
| first load: JS + CSS transferred (gzip) | ${kb(load.script + load.stylesheet)} KB (JS ${kb(load.script)}, CSS ${kb(load.stylesheet)}) | ≤ 300 KB |
| first load: fonts (woff2, not counted above) and the page | ${kb(load.font)} KB, ${kb(load.document)} KB | |
| first page of rows: opening \`/traces/{project_id}\` (page load to the first row shown), median / max of ${REPEAT} | ${ms(first.direct.median)} / ${ms(first.direct.max)} ms | ≤ 500 ms |
| first page of rows: from the projects page (click to the first row), median / max of ${REPEAT} | ${ms(first.fromList.median)} / ${ms(first.fromList.max)} ms | ≤ 500 ms |
| scrolling through all ${n} runs (${Math.ceil(RUNS / 100)} pages fetched as the end comes into view) | ${scrollSeconds.toFixed(1)} s | |
| frame interval while scrolling ${rowsPerFrame} rows a frame through the loaded runs, median / p99 / max | ${frames.median.toFixed(1)} / ${frames.p99.toFixed(1)} / ${frames.max.toFixed(1)} ms | |
| JS heap after a GC: first page / all ${n} runs loaded | ${atFirstPage.heapMiB.toFixed(1)} / ${afterAll.heapMiB.toFixed(1)} MiB | |
| DOM nodes: first page / all runs loaded (only the rows in view are in the DOM) | ${atFirstPage.nodes} / ${afterAll.nodes} | |

The first-page time covers the browser's whole path: the app's start (assets from the HTTP cache), the session
check, \`GET /sessions/{id}\` and \`POST /runs/query\` through the gateway and the export-worker, and React
rendering the rows. Fonts load after the first paint and are not part of the JS/CSS budget.
${END}`;
}

const stack = await startConsoleStack({ log });
try {
  log(`loading ${RUNS} runs…`);
  const t = performance.now();
  const project = await seedProject(stack, { name: 'big', runs: RUNS });
  log(`  loaded in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  const section = render(await main(stack, project));
  console.log(`\n${section}`);
  if (!opts['no-write']) {
    writeSection(section, BEGIN, END);
    log('wrote docs/benchmarks.md');
  }
} finally {
  await stack.stop({ keep: opts['keep-logs'] });
}
