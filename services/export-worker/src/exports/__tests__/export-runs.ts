/** Test helper: one bulk export of a project's runs, run to its end by a real runner into a test bucket, read back with DuckDB. */
import type { Database } from '@berth/db';
import { silentLogger } from '@berth/log';
import { SecretBox } from '@berth/secret-box';
import { createTestBucket, testS3, until } from '@berth/testing';
import { Destinations } from '../../destinations/destinations.js';
import type { TraceStore, TraceTables } from '../../traces/trace-store.js';
import { readExport, type DuckResult } from '../../writer/__tests__/exported.js';
import { Exports } from '../exports.js';
import { ExportRunner } from '../runner.js';
import { ExportStore } from '../store.js';
import type { BulkExportTables } from '../tables.js';

export interface ExportOfRuns {
  database: Database<TraceTables>;
  databaseUrl: string;
  traces: TraceStore;
  tenant: string;
  session: string;
  start: Date;
  end: Date;
}

/** Exports the runs of `session` in [start, end) and answers `query` over the Parquet files (`{runs}` stands for them). */
export async function exportRuns(e: ExportOfRuns, query: string): Promise<DuckResult> {
  const s3 = testS3();
  const bucket = await createTestBucket('export-runs');
  const db = e.database.db.withTables<BulkExportTables>();
  const store = new ExportStore(db);
  const destinations = new Destinations(db, new SecretBox(SecretBox.generateKey()), {
    logger: silentLogger(),
    clientOptions: { allowPrivateEndpoints: true },
  });
  const destination = await destinations.create(e.tenant, {
    destination_type: 's3',
    display_name: 'd',
    config: { bucket_name: bucket, prefix: 'out', endpoint_url: s3.endpoint, region: s3.region },
    credentials: { access_key_id: s3.accessKeyId, secret_access_key: s3.secretAccessKey },
  });
  const exp = await new Exports(db, store, e.traces).create(e.tenant, {
    bulk_export_destination_id: destination.id,
    session_id: e.session,
    start_time: e.start,
    end_time: e.end,
    format_version: 'v2_beta',
  });
  const runner = new ExportRunner({ store, databaseUrl: e.databaseUrl, destinations, traces: e.traces, logger: silentLogger() });
  const status = await until(
    'the export to finish',
    async () => {
      await runner.tick();
      await runner.idle();
      const row = await store.get(e.tenant, exp.id);
      return ['COMPLETED', 'FAILED'].includes(row.status) ? row.status : undefined;
    },
    60_000,
    20,
  );
  if (status !== 'COMPLETED') throw new Error(`the export ended ${status}`);
  const client = s3.client();
  try {
    return await readExport(client, bucket, 'out', query);
  } finally {
    client.destroy();
  }
}
