/**
 * Contract cases about the life of a stream: delete, retention, close. Registered by
 * `describeBrokerContract`; test support only.
 */
import { expect, it } from '@jest/globals';
import { InvalidArgumentError } from '@berth/errors';
import { BrokerClosedError } from '../errors.js';
import { until } from '@berth/testing';
import { drain, ids, newRunId, nextWithin, type Harness } from './harness.js';

export function lifecycleCases(harness: () => Harness): void {
  it('forgets a deleted run, ending its live subscriptions', async () => {
    const [broker, other] = [harness().broker(), harness().broker()];
    const run = newRunId();
    for (let k = 0; k < 3; k++) await broker.publish(run, 'values', k);
    await broker.end(run);
    const live = newRunId();
    const sub = other.subscribe(live, { from: 'start' });
    await sub.ready;
    await broker.publish(live, 'values', 'before delete');
    expect(await nextWithin(sub, 2_000)).toMatchObject({ done: false, value: { id: '0' } });

    await broker.delete(run);
    await broker.delete(live);
    await broker.delete(newRunId()); // unknown: a no-op
    expect(await nextWithin(sub, 2_000)).toEqual({ done: true, value: undefined });
    expect(await broker.isEnded(run)).toBe(false);
    // The run starts over: nothing from before is replayed.
    expect(await broker.publish(run, 'values', 'again')).toBe('0');
    await broker.end(run);
    expect(await drain(other.subscribe(run, { from: 'start' }))).toEqual([{ id: '0', event: 'values', data: 'again' }]);
  });

  it('numbers a new stream from startAt, goes on from an existing one, and starts a deleted one again there', async () => {
    const [broker, other] = [harness().broker(), harness().broker()];
    const run = newRunId();
    const sub = other.subscribe(run, { from: 'start' });
    await sub.ready;
    expect(
      await broker.publishMany(
        run,
        [
          { event: 'values', data: 'a' },
          { event: 'values', data: 'b' },
        ],
        { startAt: 40 },
      ),
    ).toEqual(['40', '41']);
    // An existing stream keeps its numbering whatever startAt says.
    expect(await broker.publish(run, 'values', 'c', { startAt: 7 })).toBe('42');
    expect(await broker.publish(run, 'values', 'd')).toBe('43');
    expect(await nextWithin(sub, 2_000)).toMatchObject({ done: false, value: { id: '40', data: 'a' } });
    // Replays and resumes after an id below the stream's first one.
    expect((await drain(other.subscribe(run, { from: { after: '3' } }), { max: 4 })).map((e) => e.id)).toEqual(['40', '41', '42', '43']);
    expect((await drain(other.subscribe(run, { from: { after: '41' } }), { max: 2 })).map((e) => e.id)).toEqual(['42', '43']);
    await broker.delete(run);
    expect(await broker.publish(run, 'values', 'again', { startAt: 44 })).toBe('44');
    await broker.end(run);
    expect(await drain(other.subscribe(run, { from: 'start' }))).toEqual([{ id: '44', event: 'values', data: 'again' }]);
    await expect(broker.publish(run, 'values', 'x', { startAt: -1 })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(broker.publish(run, 'values', 'x', { startAt: 1.5 })).rejects.toBeInstanceOf(InvalidArgumentError);
  });

  it('drops runs once their retention expired', async () => {
    const broker = harness().broker({ retentionSeconds: 1 });
    const kept = harness().broker(); // default retention: another process with its own sweep
    const run = newRunId();
    const fresh = newRunId();
    // Subscribed before the end: the events are read as they come, not raced against the expiry.
    const sub = kept.subscribe(run, { from: 'start' });
    await sub.ready;
    const reading = drain(sub);
    expect(
      await broker.publishMany(run, [
        { event: 'values', data: 1 },
        { event: 'values', data: 2 },
      ]),
    ).toEqual(ids(2));
    // Retention counts from the end: time taken before the call, so a slow machine only adds to it.
    const endedAt = Date.now();
    await broker.end(run);
    expect(await reading).toHaveLength(2);
    await until('the run to expire', async () => !(await broker.isEnded(run)), 6_000, 50);
    expect(Date.now() - endedAt).toBeGreaterThanOrEqual(900);
    // Its events are gone, and a publish starts a new stream.
    expect(await broker.publish(run, 'values', 'new')).toBe('0');
    await broker.end(run);
    expect(await drain(kept.subscribe(run, { from: 'start' }))).toEqual([{ id: '0', event: 'values', data: 'new' }]);
    // A run that keeps publishing stays.
    await broker.publish(fresh, 'values', 0);
    expect(await broker.publish(fresh, 'values', 1)).toBe('1');
  });

  it('ends live subscriptions on close and rejects later calls', async () => {
    const broker = harness().broker();
    const run = newRunId();
    const sub = broker.subscribe(run, { from: 'start' });
    await sub.ready;
    const waiting = sub.next();
    await broker.close();
    expect(await waiting).toEqual({ done: true, value: undefined });
    await broker.close(); // idempotent
    await expect(broker.publish(run, 'values', 1)).rejects.toBeInstanceOf(BrokerClosedError);
    await expect(broker.onControl(run, () => undefined)).rejects.toBeInstanceOf(BrokerClosedError);
    expect(() => broker.subscribe(run, { from: 'start' })).toThrow(BrokerClosedError);
  });
}
