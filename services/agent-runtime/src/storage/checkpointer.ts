/**
 * The official LangGraph Postgres checkpointer with its two write paths made single statements:
 * `put` (blobs + checkpoint) and `putWrites` each run as one atomic INSERT instead of a
 * BEGIN / one INSERT per row / COMMIT conversation, which is most of a short run's round trips.
 * Reads, tables and migrations are the upstream saver's.
 */
import type { RunnableConfig } from '@langchain/core/runnables';
import { WRITES_IDX_MAP, type ChannelVersions, type Checkpoint, type CheckpointMetadata, type PendingWrite } from '@langchain/langgraph-checkpoint';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import type pg from 'pg';

export class BerthPostgresSaver extends PostgresSaver {
  constructor(private readonly writePool: pg.Pool, schema: string) {
    super(writePool, undefined, { schema });
  }

  override async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    if (config.configurable === undefined) throw new Error('Missing "configurable" field in "config" param');
    const { thread_id, checkpoint_ns = '', checkpoint_id } = config.configurable as Record<string, string | undefined>;
    const [blobs, serializedMetadata] = await Promise.all([
      this._dumpBlobs(thread_id!, checkpoint_ns, checkpoint.channel_values, newVersions),
      this._dumpMetadata(metadata),
    ]);
    await this.writePool.query(
      `WITH blobs AS (
         INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
         SELECT $1, $2, b.channel, b.version, b.type, b.blob
         FROM unnest($7::text[], $8::text[], $9::text[], $10::bytea[]) AS b(channel, version, type, blob)
         ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
       )
       INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata`,
      [
        thread_id,
        checkpoint_ns,
        checkpoint.id,
        checkpoint_id,
        this._dumpCheckpoint(checkpoint),
        serializedMetadata,
        blobs.map((b) => b[2]),
        blobs.map((b) => b[3]),
        blobs.map((b) => b[4]),
        blobs.map((b) => (b[5] ? Buffer.from(b[5]) : null)),
      ],
    );
    return { configurable: { thread_id, checkpoint_ns, checkpoint_id: checkpoint.id } };
  }

  override async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string): Promise<void> {
    if (writes.length === 0) return;
    const c = config.configurable as Record<string, string | undefined>;
    const rows = await this._dumpWrites(c.thread_id!, c.checkpoint_ns ?? '', c.checkpoint_id!, taskId, writes as [string, unknown][]);
    // Special channels (errors, interrupts, resumes) overwrite; ordinary writes are kept as first written.
    const upsert = writes.every((w) => w[0] in WRITES_IDX_MAP);
    await this.writePool.query(
      `INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob)
       SELECT $1, $2, $3, $4, w.idx, w.channel, w.type, w.blob
       FROM unnest($5::int[], $6::text[], $7::text[], $8::bytea[]) AS w(idx, channel, type, blob)
       ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO ${
         upsert ? 'UPDATE SET channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob' : 'NOTHING'
       }`,
      [c.thread_id, c.checkpoint_ns ?? '', c.checkpoint_id, taskId, rows.map((r) => r[4]), rows.map((r) => r[5]), rows.map((r) => r[6]), rows.map((r) => Buffer.from(r[7]))],
    );
  }
}
