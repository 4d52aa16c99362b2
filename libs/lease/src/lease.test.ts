/**
 * A lease's timing, on a clock the test moves: a worker that cannot renew its lease keeps the run
 * through the lease and the hold period (an outage of the database), renews it when the database
 * answers again, and gives it up only when a renewal finds it taken or when it could renew nothing
 * for longer than lease + hold — the moment after which other workers may take the run.
 */
import { describe, expect, it } from '@jest/globals';
import { captureLogger } from '@berth/testing';
import { ManualClock } from '@berth/clock';
import { Lease, LeaseLostError, type Renewal } from './lease.js';

const settings = { leaseMs: 3000, holdMs: 60_000 };

/** A lease whose renewals answer as `database` says; `lost` collects what it reported. */
function lease(clock: ManualClock) {
  const state = { database: 'up' as 'up' | 'down' | 'taken', renewals: 0, lost: [] as LeaseLostError[] };
  const logs = captureLogger();
  const renew = async (): Promise<Renewal> => {
    state.renewals += 1;
    if (state.database === 'down') throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    return { held: state.database === 'up' };
  };
  const runLease = new Lease(
    { subject: 'run', id: 'r1', owner: 'w1', settings, renew, log: logs.logger, clock, onLost: (e) => state.lost.push(e) },
    clock.now(),
  );
  return { state, runLease, logs };
}

describe('Lease', () => {
  it('keeps the run through an outage shorter than lease + hold and renews it afterwards', async () => {
    const clock = new ManualClock();
    const { state, runLease, logs } = lease(clock);
    await clock.advance(2500);
    expect(state.renewals).toBe(2); // every second (a third of the lease)

    state.database = 'down';
    await clock.advance(50_000); // far past the lease: the run goes on
    expect(state.lost).toEqual([]);
    expect(runLease.lost).toBeUndefined();
    // One warning for the outage, not one per renewal.
    expect(logs.lines().filter((l) => l.level === 40)).toHaveLength(1);

    state.database = 'up';
    await clock.advance(1000);
    expect(logs.lines().at(-1)).toMatchObject({ msg: 'run lease renewed again', failures: 50 });
    // Renewed: a second outage has the whole lease + hold again.
    state.database = 'down';
    await clock.advance(settings.leaseMs + settings.holdMs - 1000);
    expect(state.lost).toEqual([]);
    runLease.stop();
  });

  it('gives the run up once it could renew nothing for lease + hold, not a moment before', async () => {
    const clock = new ManualClock();
    const { state } = lease(clock);
    await clock.advance(1000); // renewed at +1 s
    state.database = 'down';
    await clock.advance(settings.leaseMs + settings.holdMs - 1);
    expect(state.lost).toEqual([]);
    await clock.advance(1);
    expect(state.lost).toEqual([expect.objectContaining({ reason: 'expired', id: 'r1' })]);
    // It stopped renewing.
    const renewals = state.renewals;
    await clock.advance(10_000);
    expect(state.renewals).toBe(renewals);
  });

  it('gives the run up at the first renewal that finds it taken', async () => {
    const clock = new ManualClock();
    const { state } = lease(clock);
    state.database = 'taken';
    await clock.advance(1000);
    expect(state.lost).toEqual([expect.objectContaining({ reason: 'taken' })]);
  });

  it('hands what a held renewal read to onRenewed (a cancel recorded meanwhile), and logs a loss to a cancel at the level asked', async () => {
    const clock = new ManualClock();
    const logs = captureLogger();
    const seen: (string | undefined)[] = [];
    let answer: { held: boolean; cancel?: string } = { held: true };
    const held = new Lease(
      {
        subject: 'export run',
        id: 'e1',
        owner: 'w1',
        settings,
        renew: async () => answer,
        onRenewed: (r) => seen.push(r.cancel),
        onLost: () => undefined,
        log: logs.logger,
        clock,
        takenLevel: 'info',
      },
      clock.now(),
    );
    await clock.advance(1000);
    answer = { held: true, cancel: 'interrupt' };
    await clock.advance(1000);
    expect(seen).toEqual([undefined, 'interrupt']);
    answer = { held: false };
    await clock.advance(1000);
    expect(held.lost).toMatchObject({ reason: 'taken', subject: 'export run', id: 'e1' });
    expect(logs.lines().filter((l) => String(l.msg).startsWith('lease lost'))).toEqual([
      expect.objectContaining({ level: 30, msg: 'lease lost: stopping the export run here' }),
    ]);
  });

  it("does not call the run's own end, committed before a renewal, a loss (CI saw a `lease lost` error for a run that ended well)", async () => {
    const clock = new ManualClock();
    const { state, runLease, logs } = lease(clock);
    runLease.finishing();
    // The end write is slow (an outage): renewals go on meanwhile, and still keep the run.
    state.database = 'down';
    await clock.advance(settings.leaseMs + settings.holdMs - 3000);
    expect(state.lost).toEqual([]);
    // The end committed; the next renewal finds the run no longer running, and renewing stops.
    state.database = 'taken';
    await clock.advance(1000);
    const renewals = state.renewals;
    await clock.advance(settings.leaseMs + settings.holdMs);
    expect(state.renewals).toBe(renewals);
    expect(state.lost).toEqual([]);
    expect(logs.lines().filter((l) => String(l.msg).startsWith('lease lost'))).toEqual([]);
    runLease.stop();
  });
});
