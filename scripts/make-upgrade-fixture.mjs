#!/usr/bin/env node
/**
 * Makes the upgrade test's fixture of a release: a `make up` installation of that release
 * (`berth up` of a built checkout of it), filled through its public API as users fill it — a
 * second tenant, a deployment with a secret, a conversation with it, traces with feedback and a
 * thread, an export destination — then backed up with this checkout's `berth backup` (without the
 * built revisions, which are large and rebuilt from the sources the database keeps).
 *
 *   node scripts/make-upgrade-fixture.mjs <built checkout of the release> <release>
 *
 * Writes cli/test-fixtures/upgrade/<release>/{backup.tar.gz,fixture.json,migrations.json} (migrations.json:
 * the release's migration files and their sha256, which libs/db's expand-contract test holds the
 * migrations added since against). Needs the npm registry
 * (the deployment installs its dependencies). Run as root, as `make up` runs.
 */
import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client as AgentClient } from '@langchain/langgraph-sdk';
import { Client } from 'langsmith';
import { getCurrentRunTree, traceable } from 'langsmith/traceable';
import { S3Server } from '@berth/local-stack';

const [oldCheckout, release] = process.argv.slice(2);
if (!oldCheckout || !release) throw new Error('usage: make-upgrade-fixture.mjs <built checkout of the release> <release>');
const repo = fileURLToPath(new URL('..', import.meta.url));
const out = join(repo, 'cli/test-fixtures/upgrade', release);
const temp = await mkdtemp(join(tmpdir(), `berth-fixture-${release}-`));
const state = join(temp, 'state');
const env = { PATH: process.env.PATH, HOME: temp, XDG_CONFIG_HOME: join(temp, 'config'), BERTH_STATE_DIR: state, BERTH_PORT: '0', BERTH_SANDBOXES: 'off' };
// Asynchronous: a synchronous child would stall this process's event loop, and its idle
// connections to the gateway would be reused after the gateway closed them.
const oldBerth = async (args, cwd = temp) =>
  (await promisify(execFile)(process.execPath, [join(resolve(oldCheckout), 'cli/dist/bin.js'), ...args], { cwd, env })).stdout;
const newBerth = async (args) => (await promisify(execFile)(process.execPath, [join(repo, 'cli/dist/bin.js'), ...args], { cwd: temp, env })).stdout;
const step = (what) => console.log(`== ${what}`);

const bucket = `upgrade-${release.replace(/\W/g, '-')}`;
const s3 = new S3Server({ directory: join(temp, 's3'), buckets: [bucket] });
await s3.start();
try {
  step(`berth up of ${oldCheckout}`);
  await oldBerth(['up']);
  const { gateway_url: url, api_key: key, tenant_id: tenantId } = JSON.parse(await readFile(join(state, 'credentials.json'), 'utf8'));
  const call = async (path, init = {}) => {
    const res = await fetch(`${url}${path}`, {
      method: init.method ?? 'GET',
      headers: { 'x-api-key': init.key ?? key, 'content-type': 'application/json' },
      ...(init.json ? { body: JSON.stringify(init.json) } : {}),
    });
    if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
    return res.json();
  };

  step('a second tenant');
  const other = await call('/v1/tenants', { method: 'POST', json: { name: 'neighbour' } });

  step('a deployment with a secret');
  const project = join(temp, 'upgrade-agent');
  await cp(join(repo, 'examples/echo-agent'), project, { recursive: true, filter: (p) => !p.includes('node_modules') });
  await writeFile(join(project, '.env'), `BERTH_API_KEY=${key}\nBERTH_HOST_URL=${url}\nGREETING=ahoy\n`);
  const deployed = JSON.parse((await oldBerth(['deploy', '--json'], project)).trim().split('\n').at(-1));
  const deploymentId = deployed.deployment_id;

  step('a conversation with it');
  const agent = new AgentClient({ apiUrl: `${url}/d/${deploymentId}`, apiKey: key });
  const thread = await agent.threads.create({ metadata: { user: 'ada' } });
  for (const text of ['hello', 'again']) await agent.runs.wait(thread.thread_id, 'echo', { input: { messages: [{ role: 'user', content: text }] } });

  step('traces with feedback and a thread');
  const client = new Client({ apiUrl: url, apiKey: key });
  let turnRun;
  const model = traceable(async (q) => ({ content: q, usage_metadata: { input_tokens: 12, output_tokens: 5, total_tokens: 17 } }), {
    name: 'model',
    run_type: 'llm',
    client,
    project_name: 'upgrade-traces',
    tracingEnabled: true,
  });
  const chat = traceable(
    async (q) => {
      turnRun ??= getCurrentRunTree().id;
      return { answer: (await model(q)).content };
    },
    { name: 'chat', run_type: 'chain', metadata: { thread_id: 'conversation-1' }, client, project_name: 'upgrade-traces', tracingEnabled: true },
  );
  await chat('first turn');
  await chat('second turn');
  await client.awaitPendingTraceBatches();
  const projectId = (await client.readProject({ projectName: 'upgrade-traces' })).id;
  await client.createFeedback(turnRun, 'thumbs_up', { score: 1, sessionId: projectId });

  step('an export destination');
  const destination = await call('/api/v1/bulk-exports/destinations', {
    method: 'POST',
    json: {
      destination_type: 's3',
      display_name: 'archive',
      config: { bucket_name: bucket, prefix: 'traces', endpoint_url: s3.endpoint, region: 'us-east-1' },
      credentials: { access_key_id: 'S3RVER', secret_access_key: 'S3RVER' },
    },
  });

  step('berth down, then this checkout’s berth backup');
  await oldBerth(['down']);
  const archive = join(temp, 'backup.tar.gz');
  await newBerth(['backup', '--output', archive]);
  // Without the built revisions: large, and made again from the sources the database keeps.
  const unpacked = join(temp, 'unpacked');
  await mkdir(unpacked);
  execFileSync('tar', ['-xzf', archive, '-C', unpacked]);
  const manifest = JSON.parse(await readFile(join(unpacked, 'manifest.json'), 'utf8'));
  manifest.state_files = manifest.state_files.filter((f) => f !== 'artifacts');
  await writeFile(join(unpacked, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
  await mkdir(out, { recursive: true });
  execFileSync('tar', ['-czf', join(out, 'backup.tar.gz'), '-C', unpacked, 'manifest.json', 'roles.sql', 'db', ...manifest.state_files]);
  await writeFile(
    join(out, 'fixture.json'),
    JSON.stringify(
      {
        release,
        made_with: execFileSync('git', ['-C', oldCheckout, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim(),
        // Test credentials of a throwaway installation, kept to call it again after the upgrade.
        api_key: key,
        tenant_id: tenantId,
        other_tenant: { tenant_id: other.tenant.tenant_id, api_key: other.api_key.key },
        deployment_id: deploymentId,
        thread_id: thread.thread_id,
        trace_project_id: projectId,
        feedback_run_id: turnRun,
        destination_id: destination.id,
      },
      null,
      2,
    ) + '\n',
  );
  // The migrations this release shipped: a rolling upgrade from it runs every later one while it serves.
  const migrations = execFileSync('git', ['-C', oldCheckout, 'ls-files', 'services/*/migrations/*.sql', 'libs/*/migrations/*.sql'], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean)
    .sort();
  const digests = {};
  for (const path of migrations)
    digests[path] = createHash('sha256')
      .update(await readFile(join(resolve(oldCheckout), path)))
      .digest('hex');
  await writeFile(join(out, 'migrations.json'), JSON.stringify(digests, null, 2) + '\n');
  console.log(`wrote ${out}`);
} finally {
  await oldBerth(['down']).catch(() => undefined);
  await s3.stop();
  await rm(temp, { recursive: true, force: true });
}
