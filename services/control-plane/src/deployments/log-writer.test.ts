/**
 * Deleting a deployment while its agent server still prints: the lines of its revisions that reach
 * the log writer after (or while) the revisions are deleted are dropped without a WARN, and the
 * lines of other revisions in the same batch are kept. Real Postgres, the control plane's
 * migrations.
 */
import { expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { captureLogger, until } from '@berth/testing';
import pg from 'pg';
import { CONTROL_PLANE_SCHEMA } from '../index.js';
import { createDeployment, useDeploymentStore } from '../__tests__/deployment-store.js';
import { RevisionLogWriter } from './log-writer.js';

const fixture = useDeploymentStore('cp_log_writer');
const tenant = randomUUID();
const deployment = () => createDeployment(fixture.store, tenant);
const messages = async (revisionId: string) => (await fixture.store.logs.read(revisionId, { afterId: 0, limit: 100 })).map((l) => l.message);
const warnings = (logs: ReturnType<typeof captureLogger>) => logs.lines().filter((line) => (line.level as number) >= 40);

it('drops the lines of a deleted deployment without a WARN, and keeps the others of the batch', async () => {
  const deleted = await deployment();
  const other = await deployment();
  const logs = captureLogger();
  const writer = new RevisionLogWriter(fixture.store.logs, logs.logger);
  // The agent server says goodbye as the deployer stops it; the deployment's rows go before the batch is written.
  writer.for(deleted.revisionId, 'deploy')('received SIGTERM: shutting down');
  writer.for(other.revisionId, 'deploy')('GET /ok 200\nGET /threads 201');
  writer.for(deleted.revisionId, 'deploy')('closed');
  writer.for(other.revisionId, 'deploy')('GET /ok 200');
  await fixture.store.remove(deleted.deploymentId);
  await writer.flush();

  expect(warnings(logs)).toEqual([]);
  expect(await messages(other.revisionId)).toEqual(['GET /ok 200', 'GET /threads 201', 'GET /ok 200']);
  expect(await messages(deleted.revisionId)).toEqual([]);
});

it('drops them too when the deletion commits while the batch is being written', async () => {
  const deleted = await deployment();
  const other = await deployment();
  const logs = captureLogger();
  const writer = new RevisionLogWriter(fixture.store.logs, logs.logger);
  const deleting = new pg.Client({ connectionString: fixture.testDb.url, options: `-c search_path=${CONTROL_PLANE_SCHEMA}` });
  await deleting.connect();
  try {
    await deleting.query('BEGIN');
    await deleting.query('DELETE FROM deployments WHERE id = $1', [deleted.deploymentId]);
    writer.for(deleted.revisionId, 'deploy')('stopping');
    writer.for(other.revisionId, 'deploy')('still serving');
    const flushed = writer.flush();
    // The insert waits for the deletion's lock on the revision row; then the deletion commits.
    await until(
      'the log insert to wait for the deletion',
      async () => ((await deleting.query("SELECT 1 FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'")).rowCount ? true : undefined),
      10_000,
      20,
    );
    await deleting.query('COMMIT');
    await flushed;
  } finally {
    await deleting.end();
  }

  expect(warnings(logs)).toEqual([]);
  expect(await messages(other.revisionId)).toEqual(['still serving']);
});
