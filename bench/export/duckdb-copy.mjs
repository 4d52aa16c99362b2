/**
 * Child process of bench/export/run.mjs: DuckDB turns the CSV dump of the same runs into one
 * zstd Parquet file. The timing covers exactly one statement, `COPY (SELECT … FROM read_csv(…)) TO
 * 'runs.parquet' (FORMAT parquet, COMPRESSION zstd)`: reading and parsing the CSV from local disk,
 * casting to the same column types Berth writes, encoding, and writing the file to local disk. It
 * does not cover dumping the CSV from Postgres (timed separately) nor any upload. Prints one JSON line.
 *
 * Arguments: <csv file> <parquet file>
 */
import { statSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { DuckDBInstance } from '@duckdb/node-api';

const [csv, parquet] = process.argv.slice(2);
const text = ['id', 'tenant_id', 'session_id', 'trace_id', 'parent_run_id', 'parent_run_ids', 'reference_example_id', 'name', 'run_type'];
const columns = {
  ...Object.fromEntries(text.map((c) => [c, 'VARCHAR'])),
  start_time: 'TIMESTAMPTZ',
  end_time: 'TIMESTAMPTZ',
  status: 'VARCHAR',
  is_root: 'BOOLEAN',
  dotted_order: 'VARCHAR',
  trace_tier: 'VARCHAR',
  inputs: 'VARCHAR',
  outputs: 'VARCHAR',
  error: 'VARCHAR',
  extra: 'VARCHAR',
  events: 'VARCHAR',
  tags: 'VARCHAR',
  feedback_stats: 'VARCHAR',
  total_tokens: 'BIGINT',
  prompt_tokens: 'BIGINT',
  completion_tokens: 'BIGINT',
  total_cost: 'DECIMAL(38,12)',
  prompt_cost: 'DECIMAL(38,12)',
  completion_cost: 'DECIMAL(38,12)',
  first_token_time: 'TIMESTAMPTZ',
};
const spec = `{${Object.entries(columns).map(([name, type]) => `'${name}': '${type}'`).join(', ')}}`;

const instance = await DuckDBInstance.create(':memory:');
const connection = await instance.connect();
const threads = (await connection.runAndReadAll(`SELECT current_setting('threads') AS t`)).getRowObjectsJS()[0].t;
const started = performance.now();
await connection.run(
  `COPY (SELECT * FROM read_csv('${csv}', header = true, columns = ${spec})) TO '${parquet}' (FORMAT parquet, COMPRESSION zstd)`,
);
const seconds = (performance.now() - started) / 1000;
const usage = process.resourceUsage();
const rows = Number((await connection.runAndReadAll(`SELECT count(*) AS n FROM read_parquet('${parquet}')`)).getRowObjectsJS()[0].n);
connection.closeSync();
instance.closeSync();
console.log(JSON.stringify({ rows, seconds, maxRssMiB: usage.maxRSS / 1024, cpuSeconds: (usage.userCPUTime + usage.systemCPUTime) / 1e6, threads: Number(threads), parquetBytes: statSync(parquet).size }));
