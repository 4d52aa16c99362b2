/**
 * Share links of traces and threads (see migrations/0007_trace_shares.sql): a random token per
 * shared trace or thread, sealed at rest and looked up by its hash. Sharing what is shared answers
 * the same token; unsharing revokes it for good.
 */
import { createHash, randomUUID } from 'node:crypto';
import { sql, type Kysely } from '@berth/db';
import type { SecretBox } from '@berth/secret-box';
import type { TraceTables } from './trace-store.js';

export type ShareKind = 'trace' | 'thread';

export interface ShareSubject {
  sessionId: string;
  kind: ShareKind;
  /** The trace id, or the thread id. */
  subject: string;
}

const digest = (token: string) => createHash('sha256').update(token).digest();

export class TraceShares {
  constructor(
    private readonly db: Kysely<TraceTables>,
    private readonly box: SecretBox,
  ) {}

  /** The share token of the subject, made when it has none (concurrent callers get the same one). */
  async share(tenantId: string, s: ShareSubject): Promise<string> {
    const token = randomUUID();
    await sql`INSERT INTO trace_shares (tenant_id, session_id, kind, subject, token_sha256, sealed_token)
      VALUES (${tenantId}::uuid, ${s.sessionId}::uuid, ${s.kind}, ${s.subject}, ${digest(token)}, ${this.box.seal(token)})
      ON CONFLICT (tenant_id, session_id, kind, subject) DO NOTHING`.execute(this.db);
    return (await this.token(tenantId, s))!;
  }

  /** The subject's share token, or undefined when it is not shared. */
  async token(tenantId: string, s: ShareSubject): Promise<string | undefined> {
    const { rows } = await sql<{ sealed_token: Buffer }>`SELECT sealed_token FROM trace_shares
      WHERE tenant_id = ${tenantId}::uuid AND session_id = ${s.sessionId}::uuid AND kind = ${s.kind} AND subject = ${s.subject}`.execute(this.db);
    return rows[0] ? this.box.open(rows[0].sealed_token) : undefined;
  }

  /** Revokes the subject's link; nothing when it has none. */
  async unshare(tenantId: string, s: ShareSubject): Promise<void> {
    await sql`DELETE FROM trace_shares
      WHERE tenant_id = ${tenantId}::uuid AND session_id = ${s.sessionId}::uuid AND kind = ${s.kind} AND subject = ${s.subject}`.execute(this.db);
  }

  /** What a token shares, or undefined for a token that is not (or no longer) a link. */
  async resolve(token: string): Promise<(ShareSubject & { tenantId: string }) | undefined> {
    const { rows } = await sql<{ tenant_id: string; session_id: string; kind: ShareKind; subject: string }>`
      SELECT tenant_id, session_id, kind, subject FROM trace_shares WHERE token_sha256 = ${digest(token)}`.execute(this.db);
    const row = rows[0];
    return row && { tenantId: row.tenant_id, sessionId: row.session_id, kind: row.kind, subject: row.subject };
  }
}
