/**
 * The lease rules (lease.ts) in SQL, for the stores of leased rows to put in their claims. A
 * leased row has the columns `lease_owner` (text, null when free) and `lease_expires_at`
 * (timestamptz), written from the lease clock's time, which the statements are given: a test
 * moves it, and the rules do not depend on the database's clock agreeing with the workers'.
 * Fragments are SQL text with their values written as literals (numbers, booleans and ISO
 * timestamps checked here), so raw `pg` and Kysely statements embed them alike.
 */

/** Whether a claim may take over other workers' rows (see OwnerLiveness.mayTakeOver), and the hold period. */
export interface Takeover {
  allowed: boolean;
  holdMs: number;
}

export const NO_TAKEOVER: Takeover = { allowed: false, holdMs: 0 };

const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;

function column(row: string, name: string): string {
  if (!IDENTIFIER.test(row)) throw new RangeError(`not a table alias: ${JSON.stringify(row)}`);
  return `${row}.${name}`;
}

/** A timestamp literal. */
function timestamp(at: Date | number): string {
  const date = new Date(at);
  if (Number.isNaN(date.getTime())) throw new RangeError(`not a time: ${String(at)}`);
  return `'${date.toISOString()}'::timestamptz`;
}

/** When a lease taken or renewed at `now` expires. */
export function leaseExpiry(now: Date | number, leaseMs: number): Date {
  if (!(leaseMs > 0)) throw new RangeError(`leaseMs must be positive, got ${leaseMs}`);
  return new Date(new Date(now).getTime() + leaseMs);
}

/**
 * The advisory-lock key of an owner's liveness session, as SQL of the text expression `owner`.
 * The same key as the agent server's `lease_owner_key` (migration 0008), so old and new workers
 * see each other alive.
 */
export function ownerKey(owner: string): string {
  return `hashtextextended('berth-lease-owner:' || ${owner}, 0)`;
}

/** SQL: the owner named by the text expression `owner` holds its liveness session (liveness.ts). */
export function ownerAlive(owner: string): string {
  // A bigint advisory lock shows its high half in classid, its low half in objid, objsubid 1.
  return `EXISTS (SELECT 1 FROM pg_catalog.pg_locks l
    WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
      AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database())
      AND ((l.classid::bigint << 32) | l.objid::bigint) = ${ownerKey(owner)})`;
}

/**
 * SQL condition: the lease of row `row` (a table alias) may be taken over at `now` by a worker
 * `takeover` describes — it expired, and its owner is dead or it expired longer than the hold
 * period ago. The row's own status (that it is in progress at all) is the caller's to check.
 */
export function takeoverCondition(row: string, now: Date | number, takeover: Takeover): string {
  if (!takeover.allowed) return 'false';
  if (!(takeover.holdMs >= 0)) throw new RangeError(`holdMs must be a non-negative number, got ${takeover.holdMs}`);
  const expires = column(row, 'lease_expires_at');
  const at = new Date(now).getTime();
  return `(${expires} < ${timestamp(at)} AND (NOT ${ownerAlive(column(row, 'lease_owner'))} OR ${expires} < ${timestamp(at - takeover.holdMs)}))`;
}
