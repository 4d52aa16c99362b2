/** Test helpers: an export's objects copied out of the bucket and read back with DuckDB, as a user would. */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { GetObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { DuckDBInstance } from '@duckdb/node-api';

export interface ObjectInfo {
  key: string;
  size: number;
}

export async function listObjects(client: S3Client, bucket: string, prefix: string): Promise<ObjectInfo[]> {
  const objects: ObjectInfo[] = [];
  let token: string | undefined;
  do {
    const page = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
    for (const o of page.Contents ?? []) objects.push({ key: o.Key!, size: o.Size ?? 0 });
    token = page.NextContinuationToken;
  } while (token);
  return objects.sort((a, b) => a.key.localeCompare(b.key));
}

/** Copies every object under the folder `prefix` into a new local folder (paths relative to `prefix`) and returns it. */
export async function download(client: S3Client, bucket: string, prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-export-'));
  for (const { key } of await listObjects(client, bucket, `${prefix}/`)) {
    const object = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    const file = join(dir, key.slice(prefix.length));
    await mkdir(dirname(file), { recursive: true });
    await writeFile(file, await object.Body!.transformToByteArray());
  }
  return dir;
}

export interface DuckResult {
  rows: Record<string, unknown>[];
  types: Record<string, string>;
}

/**
 * Runs `query` with `{runs}` standing for the export's files under `dir`, read as LangSmith's docs
 * tell users to (`export_id=*` glob, Hive partitioning).
 */
export async function queryExport(dir: string, query: string): Promise<DuckResult> {
  const instance = await DuckDBInstance.create(':memory:');
  const connection = await instance.connect();
  try {
    const source = `read_parquet('${dir}/export_id=*/**/*.parquet', hive_partitioning = true)`;
    const reader = await connection.runAndReadAll(query.replaceAll('{runs}', source));
    const names = reader.columnNames();
    const types = Object.fromEntries(names.map((n, i) => [n, reader.columnTypes()[i]!.toString()]));
    return { rows: reader.getRowObjectsJS(), types };
  } finally {
    connection.closeSync();
    instance.closeSync();
  }
}

/** Downloads the export under `prefix`, queries it, and removes the local copy. */
export async function readExport(client: S3Client, bucket: string, prefix: string, query: string): Promise<DuckResult> {
  const dir = await download(client, bucket, prefix);
  try {
    return await queryExport(dir, query);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
