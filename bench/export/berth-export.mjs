/**
 * Child process of bench/export/run.mjs: Berth's exportPartition over every day of the loaded range,
 * `partitions` days at a time, into the S3 server. Prints one JSON line: rows, seconds, peak RSS,
 * and where the time went. Runs alone in its process so that its peak RSS is the writer's own.
 *
 * Argument: a JSON object { databaseUrl, s3: {endpoint, accessKeyId, secretAccessKey}, bucket,
 * exportId, tenantId, sessionId, days: ["YYYY-MM-DD", …], partitions, pageRows, fileRows }.
 */
import { performance } from 'node:perf_hooks';
import { S3Client } from '@aws-sdk/client-s3';
import { createDatabase } from '@berth/db';
import { TRACE_STORE_SCHEMA, TraceStore, emptyCheckpoint, exportPartition, partitionFolder } from '@berth/export-worker';

const args = JSON.parse(process.argv[2]);
const database = createDatabase({ connectionString: args.databaseUrl, schema: TRACE_STORE_SCHEMA, max: 2 * args.partitions });
const traces = new TraceStore(database);
const client = new S3Client({
  endpoint: args.s3.endpoint,
  region: 'us-east-1',
  forcePathStyle: true,
  credentials: { accessKeyId: args.s3.accessKeyId, secretAccessKey: args.s3.secretAccessKey },
});

// Time awaited on Postgres pages and on S3 requests. The writer reads the next page while it encodes
// the current one, so these overlap with encoding and do not add up to the total.
const awaited = { scan: 0, s3: 0, scans: 0, requests: 0 };
const scanRuns = traces.scanRuns.bind(traces);
traces.scanRuns = async (...a) => {
  const t = performance.now();
  try {
    return await scanRuns(...a);
  } finally {
    awaited.scan += performance.now() - t;
    awaited.scans += 1;
  }
};
const send = client.send.bind(client);
client.send = async (...a) => {
  const t = performance.now();
  try {
    return await send(...a);
  } finally {
    awaited.s3 += performance.now() - t;
    awaited.requests += 1;
  }
};

let rows = 0;
let files = 0;
// Day partitions run `partitions` at a time, as the export runner runs export runs (its
// `concurrency`, default 2) — several days of one export among them.
const queue = [...args.days];
async function exportDays() {
  for (let day = queue.shift(); day !== undefined; day = queue.shift()) {
    const start = new Date(`${day}T00:00:00Z`);
    const result = await exportPartition({
      traces,
      tenantId: args.tenantId,
      sessionId: args.sessionId,
      start,
      end: new Date(start.getTime() + 86_400_000),
      target: { client, bucket: args.bucket, folder: partitionFolder({ prefix: 'bench', exportId: args.exportId, tenantId: args.tenantId, sessionId: args.sessionId, day }) },
      checkpoint: emptyCheckpoint(),
      // The platform saves checkpoints in the export run's record; here they are kept in memory.
      save: async () => {},
      pageRows: args.pageRows,
      fileRows: args.fileRows,
    });
    rows += result.rows_written;
    files += result.exported_files.length;
  }
}
const started = performance.now();
await Promise.all(Array.from({ length: args.partitions }, exportDays));
const seconds = (performance.now() - started) / 1000;
const usage = process.resourceUsage();
client.destroy();
await database.close();
console.log(
  JSON.stringify({
    rows,
    files,
    seconds,
    maxRssMiB: usage.maxRSS / 1024,
    cpuSeconds: (usage.userCPUTime + usage.systemCPUTime) / 1e6,
    awaitedScanSeconds: awaited.scan / 1000,
    scans: awaited.scans,
    awaitedS3Seconds: awaited.s3 / 1000,
    s3Requests: awaited.requests,
  }),
);
