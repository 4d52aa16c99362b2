/**
 * The lease contract: what every store of leased rows must do, as cases a test file of each
 * store runs against real Postgres (`for (const c of leaseContract(h)) it(c.name, c.run)`), in
 * the style of the queue's contract suite. Time is the harness's ManualClock: expiry and the
 * hold period pass without waiting. Assertions are node's, so the library needs no test runner.
 */
import assert from 'node:assert/strict';
import type { ManualClock } from '@berth/clock';
import type { Logger } from '@berth/log';
import { OwnerLiveness } from './liveness.js';
import type { Takeover } from './sql.js';

/** Who holds a lease: its owner and its fencing token (incremented by every claim). */
export interface Holder {
  owner: string;
  token: number;
}

/**
 * The storage port of a kind of leased row, as the contract drives it. Its time is the lease
 * clock's (the harness's `clock`): a claim or renewal at `now` holds the row until `now + leaseMs`.
 */
export interface LeaseRows {
  /** Claims row `id` for `owner` when it is free or `takeover` may take it; undefined otherwise. */
  claim(id: string, owner: string, terms: { leaseMs: number; takeover: Takeover }): Promise<Holder | undefined>;
  /** Extends `holder`'s lease; false when the row is no longer its. */
  renew(id: string, holder: Holder, terms: { leaseMs: number }): Promise<boolean>;
  /** A write of the holder's work (its progress, its end), fenced by owner and token; false when refused. */
  write(id: string, holder: Holder): Promise<boolean>;
}

export interface LeaseContractHarness {
  rows: LeaseRows;
  clock: ManualClock;
  /** A new row that may be claimed now. */
  create(): Promise<string>;
  /** The rows' database, where owners' liveness sessions are opened. */
  connectionString: string;
  log: Logger;
}

export interface ContractCase {
  name: string;
  run(): Promise<void>;
}

const LEASE_MS = 10_000;
const HOLD_MS = 60_000;
const TAKEOVER: Takeover = { allowed: true, holdMs: HOLD_MS };

export function leaseContract(harness: () => LeaseContractHarness): ContractCase[] {
  const terms = (takeover: Takeover = TAKEOVER) => ({ leaseMs: LEASE_MS, takeover });
  let owners = 0;
  const owner = () => `worker-contract-${process.pid}-${++owners}-${Math.random().toString(36).slice(2)}`;

  return [
    {
      name: 'a claim holds a free row for its owner, and nobody else may claim it before it expires',
      async run() {
        const { rows, create, clock } = harness();
        const id = await create();
        const a = owner();
        const held = await rows.claim(id, a, terms());
        assert.ok(held, 'a free row is claimed');
        assert.equal(held.owner, a);
        await clock.advance(LEASE_MS - 1);
        assert.equal(await rows.claim(id, owner(), terms()), undefined, 'a row is not taken before its lease expires');
        assert.equal(await rows.write(id, held), true, 'the holder writes');
      },
    },
    {
      name: 'a renewal extends the lease from the time it is sent',
      async run() {
        const { rows, create, clock } = harness();
        const id = await create();
        const held = (await rows.claim(id, owner(), terms()))!;
        await clock.advance(LEASE_MS - 1000);
        assert.equal(await rows.renew(id, held, terms()), true);
        await clock.advance(LEASE_MS - 1);
        // Its owner is dead (no liveness session): only the renewed lease keeps the row.
        assert.equal(await rows.claim(id, owner(), terms()), undefined, 'the renewed lease holds');
        await clock.advance(2);
        assert.ok(await rows.claim(id, owner(), terms()), 'the renewed lease expired');
      },
    },
    {
      name: "a dead owner's expired row is taken over at once, with a new fencing token, by a worker allowed to",
      async run() {
        const { rows, create, clock } = harness();
        const id = await create();
        const first = (await rows.claim(id, owner(), terms()))!;
        await clock.advance(LEASE_MS + 1);
        assert.equal(await rows.claim(id, owner(), terms({ allowed: false, holdMs: HOLD_MS })), undefined, 'a worker not allowed to take over takes nothing');
        const second = await rows.claim(id, owner(), terms());
        assert.ok(second, 'taken over after expiry');
        assert.ok(second.token > first.token, 'the takeover has a newer token');
      },
    },
    {
      name: "a live owner's expired row is left to it for the hold period, then taken over",
      async run() {
        const { rows, create, clock, connectionString, log } = harness();
        const id = await create();
        const a = owner();
        const session = new OwnerLiveness({ connectionString, owner: a, applicationName: 'berth-lease-contract', log, clock });
        await session.start();
        try {
          await rows.claim(id, a, terms());
          await clock.advance(LEASE_MS + HOLD_MS - 1);
          assert.equal(await rows.claim(id, owner(), terms()), undefined, 'a live holder keeps its row through the hold');
          await clock.advance(2);
          assert.ok(await rows.claim(id, owner(), terms()), 'taken after lease and hold');
        } finally {
          session.close();
        }
      },
    },
    {
      name: "the fence refuses a stale holder's writes and renewals once another claim took the row",
      async run() {
        const { rows, create, clock } = harness();
        const id = await create();
        const a = owner();
        const stale = (await rows.claim(id, a, terms()))!;
        await clock.advance(LEASE_MS + 1);
        const fresh = (await rows.claim(id, owner(), terms()))!;
        assert.equal(await rows.write(id, stale), false, "the stale holder's write is refused");
        assert.equal(await rows.renew(id, stale, terms()), false, "the stale holder's renewal is refused");
        assert.equal(await rows.write(id, fresh), true, "the new holder's write is taken");
      },
    },
    {
      name: 'the fence is the token, not only the owner: an owner that claimed the row again cannot write with its old claim',
      async run() {
        const { rows, create, clock } = harness();
        const id = await create();
        const a = owner();
        const old = (await rows.claim(id, a, terms()))!;
        await clock.advance(LEASE_MS + 1);
        const again = (await rows.claim(id, a, terms()))!;
        assert.ok(again.token > old.token);
        assert.equal(await rows.write(id, old), false, 'the old claim is fenced off');
        assert.equal(await rows.write(id, again), true);
      },
    },
  ];
}
